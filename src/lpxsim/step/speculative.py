"""The cost of one MTP draft-and-verify round on any StepModel: one code path for the steady state
(`engine.steady_state`) and the serving simulator (`serving.mtp`).

A round of k drafts:

- **verify**: the target scores k + 1 positions per sequence (`StepModel.verify`; a GPU prices it as a
  decode step of batch x (k + 1) query rows, `gpu.compose`);
- **draft**: the MTP module (one transformer layer plus the shared embedding and head) first runs over the
  round's k + 1 positions (it extends over the tokens the verify accepted, TRT-BLOG2 "MTP Eagle", SGLang's
  draft-extend), then k - 1 more single-token steps; each pass costs `MTP_DRAFT_FRACTION` of a target
  decode step of that many rows (an assumption, docs/assumptions.md "MTP draft cost");
- **round overhead**: host work per round beyond the verify pass's own engine step
  (`spec_round_overhead_s` of the step model when it states one; 0 otherwise).
"""

from __future__ import annotations

from lpxsim.step.protocol import DecodeBatch, StepModel

# An MTP draft pass (one extra transformer layer + the shared head) relative to a full decode step of the
# same rows; an assumption documented in docs/assumptions.md ("Model accounting", "MTP draft cost").
MTP_DRAFT_FRACTION = 0.05


def mtp_draft_s(step: StepModel, batch: DecodeBatch, k: int, micro_batches: int = 1) -> float:
    """Seconds of the MTP draft stage of one round of `k` drafts for `batch` (per micro-batch split)."""
    if k <= 0:
        return 0.0
    wide = step.verify(batch, k)  # the extend pass: k + 1 positions per sequence, the verify's shape
    one = step.decode_step(batch)
    per = max(wide.latency_s, micro_batches * wide.interval_s) + (k - 1) * max(one.latency_s,
                                                                              micro_batches * one.interval_s)
    return MTP_DRAFT_FRACTION * per


def mtp_round_s(step: StepModel, batch: DecodeBatch, k: int, micro_batches: int = 1) -> float:
    """Seconds of one MTP round: verify k + 1 positions, draft k tokens, and the engine's extra per-round
    host work."""
    v = step.verify(batch, k)
    verify_s = max(v.latency_s, micro_batches * v.interval_s)
    return verify_s + mtp_draft_s(step, batch, k, micro_batches) + float(getattr(step, "spec_round_overhead_s", 0.0))
