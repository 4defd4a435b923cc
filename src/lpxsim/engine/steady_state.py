"""Steady-state serving estimate from any StepModel (LPX or GPU): TTFT, TPOT, tok/s.

Closed loop: `concurrency` users each send a request of `isl` input and `osl`
output tokens, and the next one as soon as it finishes (InferenceX / AIPerf
style). Mean-field, no queueing tails; the serving simulator gives the tails.

- Prefill runs in chunks; TTFT is the pipeline latency of the user's own chunks.
- Decode: the running batch may be split into micro-batches (on an LPX rack
  several are in flight). The token period of a user is
  max(latency(b), n x interval(b)) for n micro-batches of size b; the best n
  is chosen.
- Other users' prefills stretch decode: a prefill chunk runs in the same engine
  step as the running decodes (chunked prefill, mixed batches), so each of its
  seconds adds a second to every decoding user's phase. Of the f = (C - 1) x
  prefill occupancy the other users need per cycle, the part a user spends
  waiting in the prefill queue (FCFS: it waits for exactly those prefills) and
  behind its own pipelined prefill's drain does not overlap its decode; the rest
  does: D = (OSL - 1) x period + max(0, f - wait - drain). The serving simulator
  steps the same way (`serving.worker`: a mixed step is a decode period plus the
  chunk's interval).
- Queueing for prefill (closed loop, as InferenceX measures): a new request waits
  behind the prefills of other users that arrived before it. The wait is the
  mean-value analysis (MVA) of a closed network of C users cycling between one
  FCFS prefill server (service = prefill occupancy, plus, on an engine whose
  prefill iterations also carry the running decodes, that iteration's decode step
  shared by the prompts it packs: TRT-ITER) and the rest of their cycle
  (the decode phase), solved jointly with the decode phase by fixed point;
  `ttft_s` includes it (`ttft_wait_s` says how much).
- Admission hold (GPU engines that say so through `admission_hold`): TensorRT-LLM
  with attention data-parallelism holds a new prefill until every DP rank has one,
  or until a step counter reaches its timeout, and not while some rank runs no decode
  (`held_share`: below two streams a rank, few or none are held); the mean hold
  (`admission_hold_steps`) joins the wait in the same fixed point. A polling engine (SGLang's
  --scheduler-recv-interval) waits N / 2 steps for its poll, and the prompts read at the same poll after a
  request share its prefill pass (`co_admitted_later`).
- Speculative decoding (MTP or an external drafter): a round drafts k tokens and
  verifies k + 1 positions; it yields 1 + sum_i prod_{j<=i} a_j tokens on average
  for the conditional acceptance a_i of each draft position (`specs.mtp`; a
  scalar is the same rate at every position). An MTP round is priced by
  `step.speculative.mtp_round_s`, the function the simulator uses too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lpxsim.core.errors import UserError
from lpxsim.specs.mtp import profile, tokens_per_round
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepModel
from lpxsim.step.speculative import MTP_DRAFT_FRACTION as MTP_DRAFT_FRACTION  # re-exported (plan.estimate)
from lpxsim.step.speculative import mtp_round_s

DEFAULT_PREFILL_CHUNK = 8192  # tokens; vLLM's default max_num_batched_tokens
ARRIVALS = ("random", "stagger")  # where other users' prefills fall in a closed loop (`steady_state`)


@dataclass(frozen=True)
class Estimate:
    """A steady-state operating point. Per-user speed is never reported without its context."""

    system: str
    chips: int
    power_w: float
    isl: int
    osl: int
    concurrency: int
    ttft_s: float
    tpot_s: float
    e2e_s: float
    tok_s_user: float
    tok_s_total: float  # output tokens/s of the replica
    total_tok_s: float  # input + output tokens/s (InferenceX counts both)
    output_tok_s_per_chip: float
    total_tok_s_per_chip: float
    tok_s_per_mw: float  # output tok/s per MW of hardware power
    micro_batches: int
    decode_period_s: float  # time between two tokens of one user in pure decode
    spec_k: int = 0
    spec_accept: float = 0.0  # the per-token rate given; for a per-position profile, the share of drafts accepted
    tokens_per_round: float = 1.0
    ttft_wait_s: float = 0.0  # queueing for prefill behind other closed-loop users (included in ttft_s)


def prefill_cost(step: StepModel, isl: int, chunk: int = DEFAULT_PREFILL_CHUNK) -> tuple[float, float]:
    """(latency to the first token, worker occupancy) of prefilling `isl` tokens in chunks. A step that holds a
    cached prefix (`engine.prefix.PrefixCachedStep`: `cached_tokens`) is chunked from the cache boundary, as a
    chunked-prefill scheduler starts from a request's computed tokens (not from token 0, which would cut the
    new tokens at a chunk boundary the request never sees)."""
    from lpxsim.engine.prefix import PrefixCachedStep

    # isinstance, not getattr: asking a memoised step for a missing attribute builds its backend
    cached = step.cached_tokens if isinstance(step, PrefixCachedStep) else 0
    done, occupancy, latency = min(isl, cached), 0.0, 0.0
    while done < isl:
        n = min(chunk, isl - done)
        c = step.prefill(PrefillChunk(tokens=n, context=done))
        latency = occupancy + c.latency_s
        occupancy += c.interval_s
        done += n
    return latency, occupancy


def decode_period(step: StepModel, concurrency: int, context: int) -> tuple[float, int]:
    """(token period per user, micro-batches) for `concurrency` sequences at `context`."""
    best, best_n = math.inf, 1
    limit = max(1, step.max_batch())
    for n in _micro_batch_counts(concurrency):
        b = math.ceil(concurrency / n)
        if b > limit:
            continue
        try:
            c = step.decode_step(DecodeBatch.uniform(b, context))
        except UserError:  # this micro-batch shape does not fit; a finer split may
            continue
        period = max(c.latency_s, n * c.interval_s)
        if period < best - 1e-15:
            best, best_n = period, n
    if not math.isfinite(best):
        raise UserError(
            "concurrency", f"no micro-batch split of {concurrency} streams at {context:,} tokens runs on {step.name}"
        )
    return best, best_n


def _micro_batch_counts(concurrency: int) -> list[int]:
    counts = {1, concurrency}
    n = 2
    while n < concurrency:
        counts.add(n)
        n *= 2
    return sorted(counts)


def _decode_phase(d0: float, f: float, wait: float, drain: float) -> float:
    """A user's decode phase: its own decode steps `d0` plus the other users' prefill time `f` that does not
    fall in its queueing `wait` (FCFS: those are the prefills it waits for) or its own prefill's `drain`."""
    return d0 + max(0.0, f - wait - drain)


def _fixed_point(g: Callable[[float], float], tol_s: float) -> float:
    """The w >= 0 with g(w) = w, for g non-decreasing and bounded (the wait a user meets when every user waits
    w: a longer wait leaves less of the others' prefills in its decode, a shorter think time, a longer queue).
    False position with the Illinois step on [0, sup g]; plain iteration crawled where g's slope nears 1."""
    lo, h_lo = 0.0, g(0.0)
    if h_lo <= tol_s:
        return max(0.0, h_lo)
    hi = g(1e12)  # sup g: no other prefill left in the decode phase, the longest admission hold
    h_hi = g(hi) - hi
    if h_hi >= -tol_s:
        return hi
    side = 0
    w = hi
    for _ in range(200):
        w = hi - h_hi * (hi - lo) / (h_hi - h_lo)
        h = g(w) - w
        if abs(h) <= tol_s or hi - lo <= tol_s:
            break
        if h > 0:
            lo, h_lo = w, h
            if side == 1:
                h_hi /= 2.0
            side = 1
        else:
            hi, h_hi = w, h
            if side == -1:
                h_lo /= 2.0
            side = -1
    return w


def prefill_wait(occupancy: float, think_s: float, users: int) -> float:
    """Mean wait for the prefill server in a closed loop of `users` (exact MVA, FCFS, one server).

    Each user alternates between the prefill queue (service time `occupancy`) and `think_s` of
    everything else in its cycle. Returns the mean time spent queueing (residence - service).
    """
    if users <= 1 or occupancy <= 0:
        return 0.0
    q = r = 0.0
    for n in range(1, users + 1):
        r = occupancy * (1.0 + q)
        q = n * r / (r + think_s)
    return r - occupancy


def admission_hold_steps(ranks: int, timeout: int, arrivals_per_step: float) -> float:
    """Mean engine steps a new request is held by an admission rule that releases the waiting prefills
    once every one of `ranks` attention-DP ranks has one waiting, or `timeout` steps after the first
    of them began to wait (TensorRT-LLM's attention-DP balance).

    Arrivals are Poisson (`arrivals_per_step` per engine step) and land on a uniformly random rank: in
    a closed loop a user's next request goes to the rank that just freed a slot, i.e. wherever one
    finished. Over one hold window (from its first request to the release) the expected held
    request-steps over the expected requests is the mean hold. Sparse arrivals wait about `timeout`
    steps; dense ones fill every rank within a step or two.
    """
    if ranks <= 1 or timeout <= 0 or arrivals_per_step <= 0.0:
        return 0.0
    import numpy as np  # here, not at the top: a warm `estimate` never reaches it and numpy costs ~0.1 s

    lam = arrivals_per_step
    kmax = int(lam + 10.0 * math.sqrt(lam) + 12)
    pmf = np.empty(kmax + 1)
    pmf[0] = math.exp(-lam)
    for k in range(1, kmax + 1):
        pmf[k] = pmf[k - 1] * lam / k
    # one arrival: m occupied ranks -> m (same rank) or m + 1 (a new one)
    ball = np.zeros((ranks + 1, ranks + 1))
    for m in range(ranks + 1):
        ball[m, m] = m / ranks
        if m < ranks:
            ball[m, m + 1] = 1.0 - m / ranks
    mix = np.zeros_like(ball)  # sum_k pmf_k ball^k and sum_k k pmf_k ball^k
    kmix = np.zeros_like(ball)
    bk = np.eye(ranks + 1)
    for k in range(kmax + 1):
        mix += pmf[k] * bk
        kmix += k * pmf[k] * bk
        bk = bk @ ball
    p = np.zeros(ranks + 1)  # P(window open with m ranks waiting)
    n = np.zeros(ranks + 1)  # E[requests held; m ranks waiting]
    p[1], n[1] = 1.0, 1.0
    held, requests = 0.0, 1.0
    for t in range(1, timeout + 1):
        held += n.sum()  # every held request waits this step
        requests += lam * p.sum()
        if t == timeout:
            break
        p, n = p @ mix, n @ mix + p @ kmix
        p[ranks] = n[ranks] = 0.0  # every rank has one: released
    return held / requests


def poll_wait_steps(poll: tuple[int, int, int] | None, concurrency: int) -> float:
    """Mean decode steps a new request waits for its scheduler to read it, for an engine that polls for new
    requests every N decode steps (`admission_poll` = (concurrency threshold, N below it, N at or above it)).

    A request arriving at a random step waits N / 2 steps on average. One user's request finds the engine idle
    (an idle loop counts as a step and spins), so it waits for none.
    """
    if poll is None or concurrency <= 1:
        return 0.0
    threshold, below, above = poll
    n = below if concurrency < threshold else above
    return 0.5 * n if n > 1 else 0.0


def co_admitted_later(poll: tuple[int, int, int] | None, concurrency: int, arrivals_per_s: float, step_s: float,
                      prompts_per_pass: int) -> float:
    """Mean number of prompts that reach a polling scheduler after a request within the same poll window and
    share its prefill pass (so its first token waits for theirs as well).

    A polling engine (`admission_poll`) reads every request that arrived since its last poll at once and packs
    them into one prefill pass up to its token budget (SGL-RECV, SGL-PREFILL): all of them get their first
    token at the end of that pass. The closed loop's FCFS queue (`prefill_wait`) counts the prompts that
    arrived *before* a request; those arriving after it in the same window, on average half the window's
    other arrivals, add their prefill too, up to the pass's remaining room. Engines that read every step
    have a one-step window: negligible, not counted."""
    if poll is None or concurrency <= 1 or arrivals_per_s <= 0.0:
        return 0.0
    threshold, below, above = poll
    n = below if concurrency < threshold else above
    if n <= 1:
        return 0.0
    others = arrivals_per_s * (concurrency - 1) / concurrency  # the other users' arrival rate
    return min(0.5 * others * n * step_s, max(0.0, prompts_per_pass - 1.0))


def engine_iteration_s(decode_step_s: float, prefill_busy: float) -> float:
    """Mean length of an engine iteration when a share `prefill_busy` of the engine's time runs prefills
    inside iterations that also carry the running decodes (TensorRT-LLM schedules context requests into
    the same iteration as the generation requests, up to max_num_tokens: TRT-SCHED).

    Over a stretch T the engine spends prefill_busy x T on prefills and the rest on decode steps of
    `decode_step_s`, one per iteration: T / ((1 - prefill_busy) T / decode_step_s) iterations' mean."""
    busy = min(max(prefill_busy, 0.0), MAX_PREFILL_BUSY)
    return decode_step_s / (1.0 - busy)


MAX_PREFILL_BUSY = 0.95  # a saturated prefill server: bounds the iteration length (20 decode steps)


def _admission_hold_s(step: StepModel, concurrency: int, cycle_s: float, step_s: float,
                      iteration_s: float | None = None) -> float:
    """Seconds a request waits in the engine's admission hold and for its scheduler's next poll for new
    requests (`admission_poll`: SGLang's --scheduler-recv-interval; 0 when the engine has neither).

    The poll counts decode steps of `step_s` (SGLang polls at once after any prefill, so its window holds
    decode steps only: SGL-RECV); the hold counts engine iterations of `iteration_s` (TensorRT-LLM's
    counter advances once per iteration, prefill-carrying ones included: TRT-ADP), `step_s` if not given."""
    if cycle_s <= 0.0 or step_s <= 0.0:
        return 0.0
    poll_s = poll_wait_steps(getattr(step, "admission_poll", None), concurrency) * step_s
    hold = getattr(step, "admission_hold", None)
    if not hold:
        return poll_s
    it_s = step_s if iteration_s is None else iteration_s
    ranks, timeout, replicas = (int(v) for v in hold)
    per_replica = concurrency / max(1, replicas)
    per_step = per_replica / cycle_s * it_s  # new requests per engine iteration per replica
    return poll_s + held_share(ranks, per_replica) * admission_hold_steps(ranks, timeout, per_step) * it_s


def held_share(ranks: int, streams: float) -> float:
    """The share of new requests an attention-DP balance holds at all: it releases at once while some rank runs
    no decode (TRT-ADP: `not all_ranks_have_gen_requests`).

    The engine puts a new request on the rank with the fewest requests, so `streams` spread b or b + 1 a rank.
    At most one a rank (streams <= ranks), a rank is always idle, or the rank whose stream just ended is while
    its user's next request waits: none is held. At two or more a rank every rank keeps decoding while one of its
    requests waits: all are. Between, the requests that end on a rank holding two leave it decoding (2q of the
    streams, q = streams - ranks) and the others release at once."""
    if streams <= ranks:
        return 0.0
    if streams >= 2 * ranks:
        return 1.0
    return 2.0 * (streams - ranks) / streams


def steady_state(
    step: StepModel,
    isl: int,
    osl: int,
    concurrency: int = 1,
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
    spec_k: int = 0,
    spec_accept: float | Sequence[float] = 0.0,
    draft: StepModel | None = None,
    arrivals: str = "random",
) -> Estimate:
    """Steady-state point estimate of `step` serving `concurrency` closed-loop users.

    `arrivals`: where the other users' prefills fall in a user's cycle. "random": a new request waits for
    the prefills queued ahead of it (the MVA of a closed network with random arrival order; real engines'
    jitter). "stagger": identical requests in a closed loop settle into a deterministic stagger, each
    arriving as the prefill server frees, so no request queues and every other user's prefill lands in its
    decode phase (what the serving simulator of identical requests converges to; the engine answers LPX so,
    and a GPU with "random", the queueing its parameters were fitted under: `engine.concurrency.GPU_ARRIVALS`).
    The cycle, hence the aggregate and E2E, is the same either way; the TTFT / TPOT split is not."""
    if arrivals not in ARRIVALS:
        raise UserError("arrivals", f"expected one of {', '.join(ARRIVALS)}, got {arrivals!r}")
    for name, v in (("isl", isl), ("osl", osl), ("concurrency", concurrency)):
        if not isinstance(v, int) or v <= 0:
            raise UserError(name, f"expected a positive integer, got {v!r}")
    if spec_k < 0:
        raise UserError("accept", "expected draft length k >= 0")
    rates = profile(spec_accept, spec_k)
    kv_need = concurrency * step.kv_bytes(isl + osl)
    if kv_need > step.kv_capacity_bytes():
        raise UserError(
            "concurrency",
            f"{concurrency} streams of {isl + osl:,} tokens need {kv_need / 1e9:,.1f} GB of KV; "
            f"{step.name} holds {step.kv_capacity_bytes() / 1e9:,.1f} GB",
        )
    ttft, occupancy = prefill_cost(step, isl, prefill_chunk)
    mean_ctx = isl + osl // 2
    period, n_mb = decode_period(step, concurrency, mean_ctx)
    tokens_per_round = 1.0
    if spec_k > 0:
        period, tokens_per_round = _spec_round(step, draft, concurrency, mean_ctx, spec_k, rates, n_mb)
    d0 = (osl - 1) * period
    f = (concurrency - 1) * occupancy  # other users' prefills during one request cycle
    own = ttft
    drain = max(0.0, own - occupancy)  # a pipelined prefill's last rows draining: the next prefill may start
    round_s = period * tokens_per_round  # one engine step
    # prompts one prefill pass packs: the engine's own pass budget where it states one (SGLang's launch
    # setting), else the chunk
    per_pass = max(1, (getattr(step, "prefill_pass_tokens", None) or prefill_chunk) // isl)

    # An engine whose prefill iterations also carry the running decodes (TensorRT-LLM, vLLM: TRT-ITER) holds
    # its prefill server for the prefill and that iteration's decode step, shared by the prompts one iteration
    # packs; one that runs a prefill as its own forward (SGLang: `prefill_alone`) for the prefill alone. The
    # decoders get their token in that iteration, so the decode phase is stretched by the prefill only (f).
    mixed = getattr(step, "prefill_alone", None) is False and osl > 1
    service = occupancy + (round_s / per_pass if mixed else 0.0)

    def waited(w: float) -> float:
        """The queueing (and admission hold) a user meets when every user waits `w`."""
        d = _decode_phase(d0, f, w, drain) if osl > 1 else 0.0
        queue = prefill_wait(service, d + own - occupancy, concurrency) if arrivals == "random" else 0.0
        return queue + _admission_hold_s(step, concurrency, own + w + d, round_s, iteration) + shared

    shared, iteration = 0.0, round_s
    wait = _fixed_point(waited, tol_s=1e-7 * max(own, 1e-9))
    poll = getattr(step, "admission_poll", None)
    if osl > 1 and (poll is not None or getattr(step, "admission_hold", None)):
        # Taken at the cycle solved without them (constants keep g monotone): prompts read at the same poll
        # after this one share its prefill pass, arriving at the closed loop's rate (C per cycle); and a
        # hold counted in engine iterations lasts iterations that also carry the cycle's C prefills.
        cycle = own + wait + _decode_phase(d0, f, wait, drain)
        shared = co_admitted_later(poll, concurrency, concurrency / cycle, round_s, per_pass) * occupancy
        iteration = engine_iteration_s(round_s, concurrency * occupancy / cycle)
        wait = _fixed_point(waited, tol_s=1e-7 * max(own, 1e-9))
    ttft = own + wait
    decode_s = _decode_phase(d0, f, wait, drain) if osl > 1 else 0.0
    e2e = ttft + decode_s
    tpot = decode_s / (osl - 1) if osl > 1 else period
    out_tps = concurrency * osl / e2e
    total_tps = concurrency * (isl + osl) / e2e
    chips = max(1, step.chips)
    return Estimate(
        system=step.name, chips=step.chips, power_w=step.power_w, isl=isl, osl=osl, concurrency=concurrency,
        ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, tok_s_user=1.0 / tpot if tpot > 0 else math.inf,
        tok_s_total=out_tps, total_tok_s=total_tps, output_tok_s_per_chip=out_tps / chips,
        total_tok_s_per_chip=total_tps / chips,
        tok_s_per_mw=out_tps / (step.power_w / 1e6) if step.power_w > 0 else math.nan,
        micro_batches=n_mb, decode_period_s=period, spec_k=spec_k,
        spec_accept=float(spec_accept) if isinstance(spec_accept, (int, float))
        else (tokens_per_round - 1.0) / spec_k if spec_k else 0.0,
        tokens_per_round=tokens_per_round, ttft_wait_s=wait,
    )


def expected_tokens_per_round(k: int, accept: float | Sequence[float]) -> float:
    """Tokens emitted per draft-and-verify round: accepted drafts plus the bonus/correction token
    (`accept`: one rate for every position, or the conditional rate of each position)."""
    return tokens_per_round(profile(accept, k))


def _spec_round(
    step: StepModel, draft: StepModel | None, conc: int, ctx: int, k: int, rates: tuple[float, ...], n_mb: int
) -> tuple[float, float]:
    """(effective time per emitted token, tokens per round) with speculative decoding."""
    b = math.ceil(conc / n_mb)
    batch = DecodeBatch.uniform(b, ctx)
    if draft is not None:
        verify = step.verify(batch, k)
        d = draft.decode_step(batch)
        round_s = max(verify.latency_s, n_mb * verify.interval_s) + k * max(d.latency_s, n_mb * d.interval_s)
    else:  # in-engine MTP head
        round_s = mtp_round_s(step, batch, k, n_mb)
    tokens = tokens_per_round(rates)
    return round_s / tokens, tokens
