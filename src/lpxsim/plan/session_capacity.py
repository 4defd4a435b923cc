"""The two ceilings of agentic serving: sessions held (KV resident, thinking ones included) and streams decoding.

`plan.capacity` answers how many streams of one context fit. An agent session
keeps its KV between turns (tool calls, think time) while the deployment holds
it, and its context grows turn by turn, so the memory question has two answers:

* **sessions held**: how many sessions' KV fits at once. A held session's
  resident context after turn k is its prompt plus that turn's output,
  isl_k + osl with isl_k = min(first_isl + k (new_tokens + osl), context_cap)
  (the truncation rule of docs/serving.md: past the cap a turn keeps the newest
  `context_cap` tokens). A steady population of sessions of every age holds the
  mean of kv_bytes(isl_k + osl) over its turns each; `sessions_held_last_turn`
  is the ceiling if every session were at its longest.
* **streams decoding**: of the sessions held, those in a turn rather than in
  think time: sessions_held x duty, duty = turn_s / (turn_s + think_s), where
  `turn_s` (one turn's TTFT + decode time) comes from the operating point that
  runs the session (`lpxsim.engine`); without it the bound is sessions_held.
  `engine_session_ceilings` solves turn_s on the engine's default deployment for the session: the turn
  time at the streams decoding it implies (a fixed point, `solve_turn_s`).

The memory breakdown uses `plan.capacity`'s accounting (weights, reserve, KV,
free) for the same model, system, precisions and chips, so the numbers agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from lpxsim.catalog import get_model
from lpxsim.core.errors import UserError
from lpxsim.engine.query import DEFAULT_NEW_TOKENS, DEFAULT_THINK_S
from lpxsim.plan.capacity import Breakdown, capacity
from lpxsim.specs.accounting import kv_bytes_per_sequence


@dataclass(frozen=True)
class SessionCeilings:
    """Sessions held and streams decoding for one session shape on one deployment, with where the bytes go."""

    model: str
    system: str
    chips: int
    first_isl: int
    new_tokens: int
    turns: int
    think_s: float
    context_cap: int | None
    osl: int
    kv_budget_bytes: float  # memory left for KV after weights and reserve
    session_context_mean: float  # resident tokens of a held session, averaged over its turns
    session_context_max: int  # resident tokens at its last turn
    kv_bytes_per_session_mean: float
    kv_bytes_per_session_max: float
    sessions_held: int  # steady population of sessions of every age
    sessions_held_last_turn: int  # every session at its longest
    duty: float | None  # share of a held session's time in a turn (None: no turn time given)
    streams_decoding: int  # whole streams: floor(streams_decoding_mean)
    streams_decoding_mean: float  # sessions_held x duty: the mean number of sessions in a turn
    streams_no_reuse: int  # plan.capacity's streams at the longest context (each turn re-prefilled, none held)
    breakdown: Breakdown  # kv_bytes = sessions_held x kv_bytes_per_session_mean
    offload_sessions: int | None = None  # further sessions an offload tier of `offload_bytes` parks
    notes: list[str] = field(default_factory=list)
    turn_s: float | None = None  # one turn's TTFT + decode time (None: not given)
    turn_source: str = ""  # where turn_s came from ("given", or the engine's answer and deployment)
    # On the engine's deployment (`engine_session_ceilings`): sessions_held is the engine's own ceiling (each held
    # session counted at its last turn, the retention's headroom kept free, the compiled layout's KV), the figure
    # estimate, plan and the sweep admit; this is the pooled count of a population spread over its turns beside it.
    sessions_held_spread: int | None = None

    def shape_label(self) -> str:
        """The session shape in words: '2,000 first + 2,000 new tokens/turn, 256 out, x 5 turns, 5 s think,
        cap 10,000'."""
        cap = f", cap {self.context_cap:,}" if self.context_cap else ""
        return (f"{self.first_isl:,} first + {self.new_tokens:,} new tokens/turn, {self.osl:,} out, x {self.turns} "
                f"turns, {self.think_s:g} s think{cap}")

    def as_dict(self) -> dict:
        """Plain JSON values (the `capacity --session --json` shape)."""
        d = {k: v for k, v in self.__dict__.items() if k != "breakdown"}
        b = self.breakdown
        d["breakdown"] = {"total_bytes": b.total_bytes, "weights_bytes": b.weights_bytes,
                          "reserve_bytes": b.reserve_bytes, "kv_bytes": b.kv_bytes, "free_bytes": b.free_bytes}
        d["session_shape"] = self.shape_label()
        return d


def session_contexts(first_isl: int, new_tokens: int, turns: int, osl: int, context_cap: int | None) -> list[int]:
    """Resident tokens of a session after each of its turns (prompt + output), under the truncation rule."""
    cap = context_cap if context_cap is not None else math.inf
    out, isl = [], first_isl
    for k in range(turns):
        if k:
            isl = isl + osl + new_tokens
            if isl > cap:
                isl = int(cap)
        out.append(isl + osl)
    return out


def session_ceilings(model: str, system: str, shape, osl: int, weights: str = "fp8", kv: str = "bf16",
                     kv_layout: str = "separate", racks: float | None = None, chips: int | None = None,
                     turn_s: float | None = None, offload_bytes: float | None = None) -> SessionCeilings:
    """Both ceilings of `shape` (an `lpxsim.engine.query.SessionShape`: first_isl, new_tokens, turns, think_s,
    context_cap) with `osl` output tokens a turn, on `racks` or `chips` of `system` (default: one unit)."""
    if not isinstance(osl, int) or isinstance(osl, bool) or osl < 1:
        raise UserError("osl", f"expected a positive number of output tokens a turn, got {osl!r}")
    if turn_s is not None and not (math.isfinite(turn_s) and turn_s > 0):
        raise UserError("turn_s", f"expected a positive number of seconds, got {turn_s!r}")
    m = get_model(model)
    ctxs = session_contexts(shape.first_isl, shape.new_tokens, shape.turns, osl, shape.context_cap)
    ctx_max = max(ctxs)
    rep = capacity(m, system, context=ctx_max, weights=weights, kv=kv, kv_layout=kv_layout, racks=racks, chips=chips)
    b = rep.breakdown
    budget = max(0.0, b.total_bytes - b.weights_bytes - b.reserve_bytes)
    per = {c: kv_bytes_per_sequence(m, c, kv, kv_layout) for c in set(ctxs)}
    mean_bytes = sum(per[c] for c in ctxs) / len(ctxs)
    max_bytes = per[ctx_max]
    held = int(budget // mean_bytes) if mean_bytes > 0 else 0
    held_last = int(budget // max_bytes) if max_bytes > 0 else 0
    notes = list(rep.notes)
    cap = shape.context_cap
    if cap is not None and ctx_max + shape.new_tokens + osl <= cap:  # a turn more would still fit under the cap
        turns = f"{shape.turns:,} turn{'s' if shape.turns != 1 else ''}"
        notes.append(f"this session never reaches the {cap:,}-token cap: its {turns} from a {shape.first_isl:,}-token "
                     f"first turn end at {ctx_max:,} tokens (raise --first-isl or --turns, or leave --turns out, "
                     "to ask about the cap)")
    if cap is not None and shape.turns == 1 and shape.new_tokens >= cap:
        notes.append(f"a turn's {shape.new_tokens:,} new tokens reach the {cap:,}-token cap: each session is one turn "
                     "that prefills its whole context, with no prefix to reuse")
    if turn_s is None:
        duty = None
        mean = float(held)
        if shape.think_s > 0:
            notes.append("no turn time given: streams decoding is the upper bound (every held session in a turn)")
    else:
        duty = turn_s / (turn_s + shape.think_s)
        mean = held * duty
    streams = int(math.floor(mean + 1e-9))
    kv_held = held * mean_bytes
    breakdown = Breakdown(total_bytes=b.total_bytes, weights_bytes=b.weights_bytes, reserve_bytes=b.reserve_bytes,
                          kv_bytes=kv_held, free_bytes=b.total_bytes - b.weights_bytes - b.reserve_bytes - kv_held)
    parked = int(offload_bytes // mean_bytes) if offload_bytes and mean_bytes > 0 else None
    return SessionCeilings(
        model=m.name, system=rep.system, chips=rep.chips, first_isl=shape.first_isl, new_tokens=shape.new_tokens,
        turns=shape.turns, think_s=float(shape.think_s), context_cap=shape.context_cap, osl=osl,
        kv_budget_bytes=budget, session_context_mean=sum(ctxs) / len(ctxs), session_context_max=ctx_max,
        kv_bytes_per_session_mean=mean_bytes, kv_bytes_per_session_max=max_bytes, sessions_held=held,
        sessions_held_last_turn=held_last, duty=duty, streams_decoding=streams, streams_decoding_mean=mean,
        streams_no_reuse=rep.max_streams, breakdown=breakdown, offload_sessions=parked, notes=notes, turn_s=turn_s,
        turn_source="" if turn_s is None else "given")


# The agent session is the engine's default session (`engine.query.default_session`: one shape for every answer)
AGENT_NEW_TOKENS = DEFAULT_NEW_TOKENS  # tool output + the next message per turn
AGENT_THINK_S = DEFAULT_THINK_S  # tool or think time between turns, the KV held


def agent_shape(context_cap: int, osl: int, new_tokens: int = AGENT_NEW_TOKENS, think_s: float = AGENT_THINK_S,
                first_isl: int | None = None, turns: int | None = None):
    """The agent session whose last turn reaches `context_cap`: the engine's default session
    (`engine.query.default_session`) unless `first_isl` or `turns` is given; then a first turn of `first_isl`
    (default: the default session's), `new_tokens` a turn (plus each turn's `osl` output) until the context
    reaches the cap (`turns` None: the fewest turns that reach it)."""
    from lpxsim.engine.query import SessionShape, default_session

    base = default_session(context_cap, osl, new_tokens, think_s)
    first = first_isl if first_isl is not None else (base.first_isl if base is not None else context_cap)
    if first > context_cap:
        raise UserError("first_isl", f"the first turn ({first:,} tokens) is longer than the cap ({context_cap:,})")
    if turns is None:
        turns = 1 + max(0, math.ceil((context_cap - first) / (new_tokens + osl)))
    return SessionShape(first_isl=first, new_tokens=new_tokens, turns=turns, think_s=think_s,
                        context_cap=context_cap)


def solve_turn_s(held: int, think_s: float, turn_at: Callable[[int], float]) -> tuple[float, int]:
    """The turn time at the load it implies: the smallest c in [1, held] with f(c) <= c, where f(c) =
    floor(held x t(c) / (t(c) + think_s)) and t = `turn_at` grows with c (so f does too and f(c) = c there).
    Bisection from c = 1 (checked first: a fast turn with long think time settles at once). Returns
    (turn_s at c, c)."""
    if think_s <= 0:
        return turn_at(max(1, held)), max(1, held)
    times: dict[int, float] = {}

    def f(c: int) -> int:
        if c not in times:
            times[c] = turn_at(c)
        t = times[c]
        return max(1, min(held, math.floor(held * t / (t + think_s) + 1e-9)))

    lo, hi = 1, max(1, held)
    if f(lo) <= lo:
        return times[lo], lo
    while hi - lo > 1:  # invariant: f(lo) > lo, f(hi) <= hi (f(held) <= held always)
        mid = (lo + hi) // 2
        if f(mid) <= mid:
            hi = mid
        else:
            lo = mid
    f(hi)
    return times[hi], hi


def engine_session_ceilings(model: str, system: str, shape, osl: int, weights: str = "fp8", kv: str = "bf16",
                            kv_layout: str = "separate", framework: str = "sglang") -> SessionCeilings:
    """`session_ceilings` on the engine's default deployment for a turn at the cap (the one `estimate` answers
    on): sessions held as the engine admits them (`engine.answer.ceiling_for`, every replica; the pooled count of
    a population spread over its turns kept as `sessions_held_spread`), with turn_s the engine's end-to-end time
    of a turn (later turns prefill only their new tokens) at the streams decoding it implies (`solve_turn_s`)."""
    from lpxsim.engine.answer import answer_on, ceiling_for, kv_ceiling
    from lpxsim.engine.deployment import Precision, place
    from lpxsim.engine.query import Load, Workload

    cap = shape.context_cap if shape.context_cap is not None else max(session_contexts(
        shape.first_isl, shape.new_tokens, shape.turns, osl, None)) - osl
    precision = Precision(weights, kv, kv_layout)
    placed = place(model, system, Workload(cap, osl), None, precision, framework)
    wl = Workload(cap, osl, shape)
    dep = placed.deployment
    bound = session_ceilings(model, system, shape, osl, weights, kv, kv_layout, chips=dep.powered_chips)
    held = ceiling_for(placed.step, wl) * dep.replicas  # one answer: what the engine admits there
    if bound.sessions_held < 1 or held < 1:
        return bound
    turn_s, _ = solve_turn_s(held, shape.think_s,
                             lambda c: answer_on(placed, wl, Load(concurrency=c), precision=precision).e2e_s)
    c = session_ceilings(model, system, shape, osl, weights, kv, kv_layout, chips=dep.powered_chips, turn_s=turn_s)
    mean = held * c.duty if c.duty is not None else float(held)
    b = c.breakdown
    kv_held = held * c.kv_bytes_per_session_max  # each at its last turn, as the engine counts a held session
    no_reuse = kv_ceiling(placed.step, c.session_context_max) * dep.replicas  # `estimate --session none` there
    return replace(c, sessions_held=held, sessions_held_spread=c.sessions_held, streams_decoding_mean=mean,
                   streams_no_reuse=no_reuse,
                   streams_decoding=math.floor(mean + 1e-9),
                   breakdown=replace(b, kv_bytes=kv_held, free_bytes=b.total_bytes - b.weights_bytes
                                     - b.reserve_bytes - kv_held),
                   turn_source=f"engine: a turn at the cap on {dep.label()} at {mean:,.1f} streams decoding")
