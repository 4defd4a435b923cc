"""Saturated (offline) throughput: every request queued at once, as MLPerf Inference's Offline scenario runs.

`steady_state` answers a closed loop of C users, each prefilling alone (its own chunk of `isl` tokens) and
waiting for it. When everything queues, the engine does what its scheduler does under a full queue:

- **batch**: the running batch is as large as the KV and the engine's cap allow: the KV holds
  capacity / (KV of one sequence at its mean resident context) sequences, and no more than
  `StepModel.max_batch()` (the engine's max_num_seqs / max_batch_size) or the client's concurrency cap run.
  The resident context is isl + osl / 2 for equal lengths; for a dataset's spread of lengths, the longer
  outputs stay resident longer (`engine.lengths.LengthMix.resident_context`);
- **prefill packing**: the sequences that finish each step are replaced at once, so every step carries
  batch x isl / osl prompt tokens on average. Without a token budget they are packed from many queued prompts
  into passes of their own of up to the step model's prefill chunk: the prompt GEMMs run at M = the packed
  tokens, not at M = one prompt's length. Under an engine's iteration budget (TensorRT-LLM's `max_num_tokens`)
  they ride the decode iteration and pay what they add to it (`marginal_prefill_s_per_token`);
- **one step** = the decode of the full batch plus that step's share of packed prefill passes.

Output tokens per second = batch / step: the steady state of an endless queue (a finite run, MLPerf's sample
count, also starts full and ends draining: `engine.offline_run`). This is the regime the closed loop's per-user
prefill under-prices at large M (issue 28, item 5): a prompt of ~300 tokens prefilled alone runs its GEMMs at
M = 300, about half the efficiency of a packed 8,192-token pass on the measured tables.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from lpxsim.core.errors import UserError
from lpxsim.engine.steady_state import DEFAULT_PREFILL_CHUNK, decode_period, prefill_cost
from lpxsim.step.protocol import PrefillChunk, StepModel


@dataclass(frozen=True)
class OfflinePoint:
    """The saturated operating point of one replica."""

    system: str
    chips: int
    isl: int
    osl: int
    batch: int  # running sequences
    limited_by: str  # "kv", "max_batch", "concurrency" or "iteration_tokens"
    prefill_tokens_per_pass: int  # prompt tokens packed into one prefill pass
    decode_s: float  # decode of the full batch, per engine step
    prefill_s: float  # packed prefill work per engine step
    step_s: float
    output_tok_s: float
    output_tok_s_per_chip: float

    def as_dict(self) -> dict:
        return asdict(self)


def saturated_batch(step: StepModel, isl: int, osl: int, context: float | None = None,
                    reserve_tokens: int | None = None) -> tuple[int, str]:
    """(running sequences, what limits them) when every request is queued; `context`: the mean resident context
    (default isl + osl / 2, that of equal lengths).

    `reserve_tokens`: the KV each admitted request reserves up front, in tokens. TensorRT-LLM's default capacity
    policy, GUARANTEED_NO_EVICT, admits a request only when the blocks for its prompt and its whole output are
    free, so that no running request is ever paused (TRT-CAPACITY); trtllm-bench and trtllm-serve run it. None:
    KV is taken as the sequences grow (MAX_UTILIZATION, as NVIDIA's MLPerf harness sets it; vLLM; SGLang), and
    the batch is counted at the resident context."""
    if reserve_tokens is not None and (not isinstance(reserve_tokens, int) or reserve_tokens < 1):
        raise UserError("reserve_tokens", f"expected a positive whole number of tokens, got {reserve_tokens!r}")
    tokens = reserve_tokens if reserve_tokens is not None else (
        int(round(context)) if context is not None else isl + osl // 2)
    per_seq = step.kv_bytes(tokens)
    by_kv = int(step.kv_capacity_bytes() // per_seq) if per_seq > 0 else step.max_batch()
    cap = max(1, step.max_batch())
    if by_kv < 1:
        raise UserError("isl", f"one sequence of {isl + osl:,} tokens does not fit the KV of {step.name}")
    return (by_kv, "kv") if by_kv < cap else (cap, "max_batch")


def prefill_s_per_token(step: StepModel, isl: int, tokens_per_pass: int) -> tuple[float, int]:
    """(occupancy seconds per prompt token, prompt tokens per pass) when queued prompts of `isl` tokens are
    packed into passes of up to `tokens_per_pass` tokens (a longer prompt is chunked alone)."""
    if isl >= tokens_per_pass:
        return prefill_cost(step, isl, tokens_per_pass)[1] / isl, min(isl, tokens_per_pass)
    seqs = tokens_per_pass // isl
    c = step.prefill(PrefillChunk(tokens=isl, context=0, sequences=seqs))
    return c.interval_s / (seqs * isl), seqs * isl


def marginal_prefill_s_per_token(step: StepModel, isl: int, decode_tokens: float, prompt_tokens: float,
                                 room_tokens: float) -> tuple[float, int]:
    """(seconds per prompt token, prompt tokens per pass) when the prompts that replace finished sequences join
    an iteration that already carries `decode_tokens` generation tokens (replica-wide, per pipeline pass):
    `prompt_tokens` of them a pass on average (whole prompts of `isl`, at least one, at most `room_tokens`).

    TensorRT-LLM runs an iteration's generation and context tokens through the same GEMMs (TRT-ITER): the weights
    are read once for both, and a prompt costs what it adds to a pass already holding the decodes, not a pass of
    its own. Priced as the difference of two passes of `isl`-token prompts, the decode share plus the prompts
    and the decode share alone (linear between whole prompts): the fixed costs (weight streaming at small M,
    launches, the engine's step) cancel; the GEMM work at the larger M and the prompts' attention remain. Below
    one prompt's worth of decode tokens, the prompts are priced as passes of their own (`prefill_s_per_token`)."""
    base = decode_tokens / isl
    if base < 1.0:
        return prefill_s_per_token(step, isl, max(isl, int(room_tokens)))
    added = max(1, round(min(max(prompt_tokens, isl), max(room_tokens, isl)) / isl))

    def passes(n: float) -> float:  # a pass of n prompts, linear between whole ones
        lo = int(math.floor(n))
        t_lo = step.prefill(PrefillChunk(tokens=isl, context=0, sequences=lo)).interval_s
        if n == lo:
            return t_lo
        t_hi = step.prefill(PrefillChunk(tokens=isl, context=0, sequences=lo + 1)).interval_s
        return t_lo + (n - lo) * (t_hi - t_lo)

    return max(passes(base + added) - passes(base), 0.0) / (added * isl), added * isl


def offline_throughput(step: StepModel, isl: int, osl: int, tokens_per_pass: int | None = None,
                       iteration_tokens: int | None = None, context: float | None = None,
                       concurrency: int | None = None, reserve_tokens: int | None = None) -> OfflinePoint:
    """Saturated output throughput of `step` for prompts of `isl` and outputs of `osl` tokens (means).

    `context`: the running sequences' mean resident context (`LengthMix.resident_context`; default isl + osl / 2).
    `concurrency`: the most requests the client keeps in flight (a harness cap), None for none.
    `reserve_tokens`: the KV each request reserves when admitted (`saturated_batch`), None to count it as used.

    `iteration_tokens`: the tokens one scheduled batch may carry, generation and context together
    (TensorRT-LLM's `max_num_tokens`: TRT-ITER). Each attention-DP rank schedules its own batch, and a
    pipeline keeps one batch a stage in flight, so the replica carries iteration_tokens x ranks x stages a
    pipeline period. Sustaining a batch b takes b x isl / osl prompt tokens beside its b decode tokens in
    that period, so b is at most that budget / (1 + isl / osl), and the prompts are packed into the room the
    decodes leave in each batch. None: no such budget (an engine that runs its prefills as passes of their own).
    """
    for name, v in (("isl", isl), ("osl", osl)):
        if not isinstance(v, int) or v <= 0:
            raise UserError(name, f"expected a positive integer, got {v!r}")
    if tokens_per_pass is None:
        tokens_per_pass = int(getattr(step, "prefill_chunk", DEFAULT_PREFILL_CHUNK))
    batch, limit = saturated_batch(step, isl, osl, context, reserve_tokens)
    if concurrency is not None:
        if not isinstance(concurrency, int) or concurrency < 1:
            raise UserError("concurrency", f"expected a positive integer, got {concurrency!r}")
        if concurrency < batch:
            batch, limit = concurrency, "concurrency"
    if iteration_tokens is not None:
        if iteration_tokens <= 1:
            raise UserError("iteration_tokens", f"expected at least 2 tokens an iteration, got {iteration_tokens!r}")
        ranks, stages = _schedulers(step)
        by_tokens = max(1, int(iteration_tokens * ranks * stages / (1.0 + isl / osl)))
        if by_tokens < batch:
            batch, limit = by_tokens, "iteration_tokens"
        room = max(1, int(iteration_tokens - batch / (ranks * stages)))  # per scheduled batch
        tokens_per_pass = min(tokens_per_pass, room * ranks)  # a replica's pass spans its attention-DP ranks
    resident = int(round(context)) if context is not None else isl + osl // 2
    period, _ = decode_period(step, batch, resident)
    if iteration_tokens is not None and isl <= room:
        ranks, stages = _schedulers(step)
        per_tok, packed = marginal_prefill_s_per_token(step, isl, batch / stages, batch * isl / osl / stages,
                                                       room * ranks)
    else:
        per_tok, packed = prefill_s_per_token(step, isl, tokens_per_pass)
    prefill_s = batch * isl / osl * per_tok
    step_s = period + prefill_s
    out = batch / step_s
    return OfflinePoint(system=step.name, chips=step.chips, isl=isl, osl=osl, batch=batch, limited_by=limit,
                        prefill_tokens_per_pass=packed, decode_s=period, prefill_s=prefill_s, step_s=step_s,
                        output_tok_s=out, output_tok_s_per_chip=out / max(1, step.chips))


def _schedulers(step: StepModel) -> tuple[int, int]:
    """(attention-DP ranks, pipeline stages) of a step with a GPU layout; (1, 1) otherwise."""
    layout = getattr(step, "layout", None)
    if layout is None or not hasattr(layout, "attention_ranks"):
        return 1, 1
    return layout.attention_ranks, max(1, layout.pp)


def closed_loop_ceiling(step: StepModel, isl: int, osl: int) -> float:
    """Output tok/s per chip of `steady_state`'s closed loop at the largest concurrency whose full-length KV
    fits (each prompt prefilled alone): what the saturated regime replaces, kept for comparison."""
    from lpxsim.engine.steady_state import steady_state

    fits = int(step.kv_capacity_bytes() // step.kv_bytes(isl + osl))
    users = max(1, min(fits, step.max_batch()))
    return steady_state(step, isl, osl, users).output_tok_s_per_chip
