"""The predicted per-user speed range of an SRAM machine's published figure (issue 28, item 6).

A public figure of a first-generation Groq or Cerebras endpoint was measured through the vendor's API at a
load nobody published. The prediction is a range of output tok/s per user built from four mechanisms, each a
stated input range (nothing is fitted to the figures):

- the device: the compiled (LPU) or modelled (wafer) decode step on the chips or wafers actually used where
  the vendor stated them, else the fewest that hold the model; its latency includes the pipeline's fill and
  every inter-chip or inter-wafer hand-off a batch-1 token pays;
- batching on a shared endpoint, from a dedicated batch-1 stream to the loaded ceiling: as many streams as
  the KV holds (`_kv_full_batch`), split into the micro-batches that serve them best
  (`steady_state.decode_period`); each user's token then waits n x the busiest stage (the pipeline's other
  micro-batches) or its own latency, whichever is longer;
- the host, API and sampling path per token (`HOST_TOKEN_S`, an assumption): the sampled token returns to
  the host and the next step waits for it; under load the host works on one user while the device runs
  the others, so it adds to a user's latency, not to the pipeline's interval;
- speculative decoding where the figure used it or did not say (`SPEC_*`): k draft steps on a separate
  drafter, one verify of k + 1 positions, accepted tokens per round from a per-position acceptance range.

high end: batch 1, no host time, the best speculative round where allowed; low end: the loaded ceiling with
the slowest host path, without speculation. `implied_host_s` is the host time per token a figure implies at
batch 1 without speculation (a diagnostic, not an input).
"""

from __future__ import annotations

import math

HOST_TOKEN_S = (0.0, 2.0e-3)  # per output token: sampling on device .. one Python serving-loop step (assumptions.md)
SPEC_ACCEPT = (0.56, 0.84)  # per-position acceptance: the project's Beta(7, 3) prior, mean 0.7 +- one sd
SPEC_K_MAX = 5  # draft lengths tried (an operator tunes k; none was published)
LPU_MAX_BATCH = 1024  # as LpxStepModel.max_batch caps it
SPEC_DRAFTER = {"llama-3.1-70b": "llama-3.1-8b", "llama-3.1-405b": "llama-3.1-8b", "gpt-oss-120b": "gpt-oss-20b"}


def predicted_range(point: dict) -> dict:
    """The range and its parts for one row of ``data/measured/published_points.csv``:
    {batch1_tok_s_user, pipeline_full_tok_s_user, kv_full_tok_s_user, loaded_users, low_tok_s_user,
    high_tok_s_user, host_s_range, spec, chips, stages, layout}."""
    step, ctx, batch1_latency_s = _lpu(point) if point["path"] == "compiled-lpx" else _wafer(point)
    return _range(step, ctx, batch1_latency_s, point)


def _int(v: str | None) -> int | None:
    return int(v) if v not in (None, "") else None


def _lpu(p: dict):  # noqa: ANN202 - (LpxStepModel, context, batch-1 latency)
    from lpxsim.graph import Phase
    from lpxsim.lpu import LpxStepModel

    ctx = _int(p["context"])
    kw = {"chips": _int(p["chips"]), "weights": p["weights"], "context": ctx}
    if p["system"] == "lpx":  # the deployment T1-T3 run on: compiled once for its 131,072-token target
        kw = {"weights": p["weights"]}
    sm = LpxStepModel(p["model"], p["system"], **{k: v for k, v in kw.items() if v is not None})
    t = sm.step_summary(Phase.decode([ctx]))["timing"]  # the compiled batch-1 step (as estimate runs it)
    return sm, ctx, t["latency_s"]


def _wafer(p: dict):  # noqa: ANN202 - (WseStepModel, context, batch-1 latency)
    from lpxsim.wse import WseStepModel

    step = WseStepModel(p["model"], p["system"], wafers=_int(p["chips"]), weights=p["weights"], kv="bf16")
    ctx = int(p["isl"]) + int(p["osl"]) // 2  # the mean context over the decode phase
    return step, ctx, _decode(step, 1, ctx).latency_s


def _decode(step, batch: int, ctx: int):  # noqa: ANN001, ANN202 - any StepModel -> StepCost
    from lpxsim.step.protocol import DecodeBatch

    return step.decode_step(DecodeBatch.uniform(batch, ctx))


def _range(step, ctx: int, lat1: float, p: dict) -> dict:  # noqa: ANN001 - any StepModel
    from lpxsim.engine.steady_state import decode_period
    from lpxsim.lpu.served import full_pipeline_tok_s_user

    c1 = _decode(step, 1, ctx)
    stages = len(getattr(step, "stages", ())) or _lpu_stages(step, ctx)
    users = _kv_full_batch(step, ctx)
    if users * c1.interval_s <= c1.latency_s:  # single streams never wait for the pipeline: no split is faster
        period, n, cb = c1.latency_s, users, c1
    else:
        period, n = decode_period(step, users, ctx)
        cb = _decode(step, math.ceil(users / n), ctx)
    h_lo, h_hi = HOST_TOKEN_S
    low = 1.0 / max(cb.latency_s + h_hi, n * cb.interval_s)
    spec = speculative_range(step, p, ctx) if _spec_allowed(p) else None
    high = max(1.0 / (lat1 + h_lo), spec["best_tok_s_user"] if spec else 0.0)
    return {"batch1_tok_s_user": round(1.0 / lat1, 1),
            "pipeline_full_tok_s_user": round(full_pipeline_tok_s_user(lat1, c1.interval_s, stages), 1),
            "kv_full_tok_s_user": round(1.0 / period, 1), "loaded_users": users, "loaded_micro_batches": n,
            "low_tok_s_user": round(low, 1), "high_tok_s_user": round(high, 1),
            "host_s_range": [h_lo, h_hi], "spec": spec, "chips": step.chips, "stages": stages,
            "layout": step.layout.describe() if hasattr(step, "layout") else step.name}


def _lpu_stages(step, ctx: int) -> int:  # noqa: ANN001 - LpxStepModel
    from lpxsim.graph import Phase

    return len(step.step_summary(Phase.decode([ctx]))["timing"]["stage_spans_s"])


def _spec_allowed(p: dict) -> bool:
    """Speculation widens the range where the figure used it or did not say, and a drafter is assumed."""
    said = p["spec_decoding"].strip().lower()
    return p["path"] == "wafer-scale" and p["model"] in SPEC_DRAFTER and (said.startswith("yes")
                                                                           or said.startswith("not stated"))


def tokens_per_round(accept: float, k: int) -> float:
    """Expected tokens a round of k drafts yields: the accepted prefix plus the verify's own token."""
    if not 0.0 <= accept < 1.0:
        raise ValueError(f"acceptance must be in [0, 1), got {accept}")
    return (1.0 - accept ** (k + 1)) / (1.0 - accept)


def speculative_range(target, p: dict, ctx: int) -> dict:  # noqa: ANN001 - the target's WseStepModel
    """Per-user tok/s of batch-1 speculative decoding on the wafer pipeline, at each end of SPEC_ACCEPT with
    the best draft length, no host time: round = k draft steps (the drafter on its own wafers) + one verify."""
    from lpxsim.step.protocol import DecodeBatch
    from lpxsim.wse import WseStepModel

    drafter = WseStepModel(SPEC_DRAFTER[p["model"]], p["system"], weights=p["weights"], kv="bf16")
    draft_s = _decode(drafter, 1, ctx).latency_s
    out = {"drafter": SPEC_DRAFTER[p["model"]], "draft_step_s": draft_s, "by_acceptance": {}}
    for a in SPEC_ACCEPT:
        best = (0.0, 0)
        for k in range(1, SPEC_K_MAX + 1):
            rnd = k * draft_s + target.verify(DecodeBatch.uniform(1, ctx), k).latency_s
            best = max(best, (tokens_per_round(a, k) / rnd, k))
        out["by_acceptance"][str(a)] = {"tok_s_user": round(best[0], 1), "k": best[1]}
    out["best_tok_s_user"] = max(v["tok_s_user"] for v in out["by_acceptance"].values())
    return out


def implied_host_s(published_tok_s_user: float, batch1_tok_s_user: float) -> float:
    """Host time per token a published figure implies if it was measured at batch 1 without speculation
    (negative: the device alone is slower than the figure)."""
    return 1.0 / published_tok_s_user - 1.0 / batch1_tok_s_user


def _kv_full_batch(step, context: int) -> int:  # noqa: ANN001 - any StepModel
    """The most streams at `context` whose KV fits the replica (at least 1), capped by the engine's batch.

    A compiled LPU deployment's `max_batch` is its KV ceiling at the deployment's target context (longer than
    a served figure's), so its cap is the compiler's largest batch instead."""
    from lpxsim.lpu import LpxStepModel

    per = max(step.kv_bytes(context), 1.0)
    cap = LPU_MAX_BATCH if isinstance(step, LpxStepModel) else step.max_batch()
    return max(1, min(cap, math.floor(step.kv_capacity_bytes() / per)))
