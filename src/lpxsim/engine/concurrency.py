"""The concurrency search of one replica: the largest load at which every user still gets a per-user target.

Per-user speed falls as concurrency grows (larger batches, other users' prefills) and aggregate throughput
rises, so the best concurrency is the largest one that still meets the target: found by doubling then
bisection, capped by the KV ceiling (the steady state refuses concurrencies whose KV does not fit).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from lpxsim.core.errors import UserError
from lpxsim.engine.steady_state import Estimate, steady_state
from lpxsim.step.protocol import StepModel

ARRIVALS = "stagger"  # the engine's steady-state queueing on LPX and wafer-scale systems (`engine.answer`)
# ... and on a GPU: the random-arrival wait, the queueing its engine parameters were fitted under and `lpxsim
# validate` replays (engine.answer; docs/engine.md, "One queueing answer")
GPU_ARRIVALS = "random"
MAX_CONCURRENCY = 1 << 16  # search cap when the KV ceiling is larger still


def arrivals_for(system: str) -> str:
    """The arrival pattern the engine's steady state prices `system` under: `GPU_ARRIVALS` on a GPU, else
    `ARRIVALS`."""
    from lpxsim.catalog import get_system

    return GPU_ARRIVALS if get_system(system).chip.kind == "gpu" else ARRIVALS


def kv_fit(step: StepModel, context: int) -> int:
    """Sequences of `context` tokens whose KV fits one replica (no batch cap: sessions held between turns);
    a step with no KV per sequence holds its largest batch."""
    per = step.kv_bytes(context)
    return max(0, math.floor(step.kv_capacity_bytes() / per + 1e-9)) if per > 0 else step.max_batch()


def replica_ceiling(step: StepModel, context: int) -> int:
    """Streams of `context` tokens one replica runs at once: its KV fit, capped by its largest batch."""
    return min(kv_fit(step, context), step.max_batch())


class BeyondHeld(UserError):
    """More sessions than a replica holds under the default retention (`sessions_fit`); `held` is how many it
    does hold, so a search can start there."""

    def __init__(self, held: int, message: str) -> None:
        super().__init__("concurrency", message)
        self.held = held


def sessions_fit(step: StepModel, context: int) -> int:
    """Sessions of `context` tokens one replica keeps resident under the serving simulator's default retention
    without an offload tier (`hold`, `serving.config.RetentionConfig`): a session with nothing resident is
    admitted only while `headroom` of the KV stays free for the held sessions' growth, so of sessions all at
    `context`, n are held where n x kv_bytes(context) <= (1 - headroom) x capacity (docs/engine.md, "Sessions"),
    and one wherever one fits at all (the headroom asked of a newcomer is capped at the capacity, so an empty
    replica always admits a session that fits it)."""
    from lpxsim.serving.config import RetentionConfig

    per = step.kv_bytes(context)
    if per <= 0:
        return step.max_batch()
    usable = (1.0 - RetentionConfig().headroom) * step.kv_capacity_bytes()
    return max(min(1, kv_fit(step, context)), math.floor(usable / per + 1e-9))


def kv_ceiling(step: StepModel, isl: int, osl: int) -> int:
    """The search's concurrency ceiling: the KV fit of isl + osl tokens, capped by MAX_CONCURRENCY."""
    if step.kv_bytes(isl + osl) <= 0:
        return MAX_CONCURRENCY
    return min(MAX_CONCURRENCY, kv_fit(step, isl + osl))


class Search(NamedTuple):
    """What the concurrency search found on one replica."""

    best: Estimate | None  # the most output tok/s among the points meeting the target
    first: Estimate | None  # concurrency 1 (None when not even one stream runs)
    ceiling: int  # KV ceiling
    error: str = ""  # why the backend refused a concurrency (a step shape that does not fit), if it did


def best_concurrency(step: StepModel, isl: int, osl: int, target: float, spec_k: int = 0,
                     spec_accept: float = 0.0, evaluate: Callable[[int], Estimate] | None = None,
                     arrivals: str = ARRIVALS) -> Search:
    """The largest concurrency at which every user gets >= `target`, up to the KV ceiling.

    A concurrency the backend refuses (e.g. a compiled step shape that overflows SRAM) counts as missing
    the target. `evaluate(c)`: how a concurrency is priced (default: the steady state of `step` under `arrivals`; the
    search passes the engine's answer for one replica, `engine.answer.replica_estimate`). `spec_k` > 0: speculative decoding (MTP), k drafted tokens per round at acceptance `spec_accept`.
    """
    ceiling = kv_ceiling(step, isl, osl)
    if ceiling < 1:
        return Search(None, None, 0)
    cache: dict[int, Estimate | None] = {}
    errors: list[str] = []

    def ok(c: int) -> bool:
        if c not in cache:
            try:
                cache[c] = evaluate(c) if evaluate is not None else steady_state(
                    step, isl, osl, c, spec_k=spec_k, spec_accept=spec_accept, arrivals=arrivals)
            except UserError as e:
                if e.field in ("accept", "isl", "osl"):
                    raise  # the user's input, not this concurrency
                cache[c], _ = None, errors.append(str(e))
        e = cache[c]
        return e is not None and e.tok_s_user >= target

    if not ok(1):
        return Search(None, cache[1], ceiling, errors[0] if errors else "")
    lo, hi = _bracket_target(ok, ceiling)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    meeting = [e for e in cache.values() if e is not None and e.tok_s_user >= target]
    best = max(meeting, key=lambda e: (e.tok_s_total, -e.concurrency))
    return Search(best, cache[1], ceiling, errors[0] if errors else "")


def _bracket_target(ok: Callable[[int], bool], ceiling: int) -> tuple[int, int]:
    """(lo, hi): lo meets the target, hi does not (or is ceiling + 1), by doubling from 1."""
    lo, c = 1, 2
    while c <= ceiling:
        if not ok(c):
            return lo, c
        lo, c = c, c * 2
    if lo < ceiling and ok(ceiling):
        return ceiling, ceiling + 1
    return lo, ceiling + 1


def engine_edge(evaluate: Callable[[int], Estimate], guess: int, target: float) -> Estimate | None:
    """The engine's answer at the largest concurrency <= `guess` that meets `target`: the steady state's edge
    `guess` first, then halving to a point that meets it, then bisecting back up (the simulator answers some
    points, and each of its runs costs seconds: the search itself stays on the steady state)."""
    def meets(c: int) -> Estimate | None:
        try:
            e = evaluate(c)
        except UserError:
            return None
        return e if e.tok_s_user >= target else None

    try:  # the guess first; a session workload's guess beyond the sessions held starts at those instead
        e = evaluate(guess)
        hi, best = guess, e if e.tok_s_user >= target else None
    except BeyondHeld as err:
        hi = max(1, min(guess, err.held))
        best = meets(hi)
    except UserError:
        hi, best = guess, None
    if best is not None:
        return best
    lo = hi // 2
    while lo >= 1 and (best := meets(lo)) is None:
        hi, lo = lo, lo // 2
    if best is None:
        return None
    while hi - lo > 1:  # lo meets the target, hi does not
        mid = (lo + hi) // 2
        if (e := meets(mid)) is not None:
            lo, best = mid, e
        else:
            hi = mid
    return best
