"""The deployment search: the operating point of one replica at a per-user speed target.

Given a model, a system, an input context (ISL), an output length (OSL) and a
target tok/s per user, find the replica layout and the concurrency that give
the most output tokens/s per MW while every user still gets >= the target
(the engine's steady state, closed loop, deterministic stagger: `lpxsim.engine.steady_state`). If even
one user cannot reach the target, say so, with the best per-user speed the
system does reach at that context.

Per-user speed falls as concurrency grows (larger batches, other users'
prefills), and aggregate throughput rises, so the best concurrency is the
largest one that still meets the target: found by doubling then bisection,
capped by the KV ceiling (steady_state refuses concurrencies whose KV does not
fit). Replica sizes tried (bounded: each LPX size costs a layout search and its compiles):
on LPX the fewest whole nodes that hold the weights plus one stream, its double, and
the fewest whole racks -- at most `MAX_LPX_SIZES`; on GPUs the fewest
whole domains and their double, each with the layout search's latency and throughput
picks and wide EP for MoE. Every size is placed as the engine places a deployment the
user gives (`engine.deployment.place`): its layout searched once for the workload.
`plan point` is a thin caller (`lpxsim.plan.operating_point`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from lpxsim.backends import sizing
from lpxsim.backends.factory import Layout
from lpxsim.catalog import get_system
from lpxsim.core.errors import UserError
from lpxsim.engine.prefix import PrefixCachedStep
from lpxsim.engine.steady_state import Estimate, steady_state
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec
from lpxsim.step.protocol import StepModel

ARRIVALS = "stagger"  # the engine's queueing (`engine.answer`)

# (model, system, layout, weights, kv, kv_layout) -> the StepModel of one replica.
StepFactory = Callable[[ModelSpec, str, Layout, str, str, str], StepModel]

MAX_REPLICA_SIZES = 2  # GPU replica sizes tried: the smallest that fits, then its double
MAX_LPX_SIZES = 3  # LPX sizes tried: fewest nodes, its double, the fewest whole racks
MAX_CONCURRENCY = 1 << 16  # search cap when the KV ceiling is larger still


@dataclass(frozen=True)
class Candidate:
    """One replica layout's best point at the target (or why it has none)."""

    layout: str
    chips: int
    units: float
    power_w: float
    feasible: bool
    concurrency: int = 0
    tok_s_user: float = 0.0
    tok_s_total: float = 0.0
    tok_s_per_mw: float = 0.0
    batch1_tok_s_user: float = 0.0  # per-user speed at concurrency 1, same context
    kv_max_concurrency: int = 0
    reason: str = ""
    replica_layout: str = ""  # the replica's layout as a deployment states it (`engine.query.Deployment.layout`)


@dataclass(frozen=True)
class OperatingPoint:
    """Best replica and concurrency at a per-user target. Per-user speed always comes with context and concurrency."""

    model: str
    system: str
    isl: int
    osl: int
    target_tok_s_user: float
    weights: str
    kv: str
    backend: str
    feasible: bool
    new_tokens: int = 0  # input tokens prefilled per request (the rest was in the prefix cache)
    think_s: float = 0.0  # a session's tool time between turns, its KV held (concurrency then counts sessions)
    session: str = "no prefix reuse"  # the workload's session, as its label says
    spec_k: int = 0  # MTP draft tokens per round (0: no speculative decoding)
    spec_accept: float = 0.0  # per-token draft acceptance
    layout: str = ""
    replica_layout: str = ""  # as a deployment states it: `estimate --layout` (LPX), --tp/--ep/... (GPU)
    replica_chips: int = 0
    replica_units: float = 0.0
    unit_name: str = "rack"
    replica_power_w: float = 0.0
    concurrency: int = 0
    tok_s_user: float = 0.0
    tok_s_total: float = 0.0  # output tok/s of one replica
    tok_s_per_mw: float = 0.0
    ttft_s: float = 0.0
    e2e_s: float = 0.0
    requests_per_s: float = 0.0  # completed requests/s of one replica (= concurrency / e2e)
    best_tok_s_user: float = 0.0  # the fastest a user gets (concurrency 1) on any layout tried
    reason: str = ""
    candidates: list[Candidate] = field(default_factory=list)

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "candidates"}
        d["context"] = self.isl
        d["candidates"] = [c.__dict__ for c in self.candidates]
        return d


# --- step-model factories ------------------------------------------------------------------------


def engine_factory(isl: int, osl: int) -> StepFactory:
    """A step factory that places each replica size as the engine places a deployment the user gives
    (`engine.deployment.place`): the layout searched once for this workload; one replica's step model."""
    from lpxsim.engine.deployment import Precision, gpu_layout_text, place
    from lpxsim.engine.query import Deployment, Workload

    def make(model: ModelSpec, system: str, layout: Layout, weights: str, kv: str, kv_layout: str) -> StepModel:
        lpu = get_system(system).is_lpu
        if lpu:
            n = layout.chips if layout.chips is not None else get_system(system).chips_from(layout.racks, None)
            dep = Deployment(system, n, given=True)
        else:
            lay = gpu_layout_text(layout.tp, layout.ep, layout.pp, layout.dp_attention) if layout.tp else ""
            dep = Deployment(system, layout.gpus, layout=lay, given=True, framework=layout.framework)
        return place(model, system, Workload(isl, osl), dep, Precision(weights, kv, kv_layout), layout.framework,
                     layout.goal).step

    return make


ANALYTIC_REMOVED = ("'analytic' was removed: every answer comes from the detailed backends (compiled LPX, "
                    "GPU model); use auto")


def check_backend(backend: str, field: str = "backend") -> None:
    """auto or project; a one-line error for anything else (the removed first-order model named as such)."""
    if backend == "analytic":
        raise UserError(field, ANALYTIC_REMOVED)
    if backend not in ("auto", "project"):
        raise UserError(field, f"expected auto or project, got {backend!r}")


# --- replica sizes -------------------------------------------------------------------------------


def replica_layouts(model: ModelSpec, system: SystemSpec, context: int, weights: str, kv: str, kv_layout: str
                    ) -> tuple[list[Layout], str]:
    """Replica layouts to try, smallest first, and a reason when none fits the system."""
    need_units = sizing.units_needed(model, system, context, weights, kv, kv_layout)
    if need_units > system.max_units:
        return [], (
            f"{model.name} ({weights}) + one {context:,}-token stream needs {need_units} {system.unit_name}s of "
            f"{system.chip.name}; {system.name} joins at most {system.max_units}"
        )
    if system.is_lpu:
        return [Layout(chips=c) for c in lpx_sizes(model, system, context, weights, kv, kv_layout)], ""
    node = system.topology.chips_per_node
    sizes, units = [], need_units
    while units <= system.max_units and len(sizes) < MAX_REPLICA_SIZES:
        sizes.append(units * node)
        units *= 2
    out = []
    for g in sizes:
        # the backend searches at its own reference workload, so take both of its goals' picks
        out += [Layout(gpus=g, goal="throughput"), Layout(gpus=g, goal="latency")]
        wide = wide_ep_layout(model, g)
        if wide is not None:
            out.append(wide)
    return out, ""


def lpx_sizes(model: ModelSpec, system: SystemSpec, context: int, weights: str, kv: str, kv_layout: str
              ) -> list[int]:
    """LPX chip counts to try, smallest first: the fewest whole nodes holding the weights plus one stream, its
    double, and the fewest whole racks (within the chain; at most `MAX_LPX_SIZES`)."""
    node, per_unit = system.topology.chips_per_node, system.chips_per_unit
    top = system.max_units * per_unit
    fewest = node
    while fewest < top and sizing.streams_that_fit(model, system, context, fewest, weights, kv, kv_layout) < 1:
        fewest += node
    racks = sizing.units_needed(model, system, context, weights, kv, kv_layout) * per_unit
    sizes = sorted({c for c in (fewest, 2 * fewest, racks) if fewest <= c <= top})
    return sizes[:MAX_LPX_SIZES]


def wide_ep_layout(model: ModelSpec, gpus: int) -> Layout | None:
    """MoE on a whole GPU domain: attention data-parallel, experts spread over every GPU (wide EP).

    The layouts large MoE deployments use on NVL72 (e.g. DeepSeek-V3 with EP over the domain); the
    GPU backend's own search covers power-of-two TP/EP only, so this one is tried as well.
    """
    if not model.is_moe:
        return None
    experts = next(layer.ffn.num_experts for layer in model.layers if layer.ffn.is_moe)
    ep = max(d for d in range(1, gpus + 1) if gpus % d == 0 and experts % d == 0)
    return Layout(gpus=gpus, tp=gpus, ep=ep, dp_attention=True) if ep > 1 else None


def replica_layout_text(step: StepModel) -> str:
    """The layout of one replica as a deployment states it (LPX layout string; GPU tp/ep/pp[/dp-attention/kvp])."""
    from lpxsim.engine.deployment import _layout_of, gpu_layout_of, gpu_layout_text

    text = _layout_of(step)
    if text.startswith("TP") and text[2:3].isdigit():
        lay = gpu_layout_of(text)
        lay.pop("replicas")
        return gpu_layout_text(**lay)
    return text


def _layout_label(step: StepModel) -> str:
    name = getattr(step, "name", "")
    return f"{step.chips} chips: {name}" if name else f"{step.chips} chips"


# --- concurrency search --------------------------------------------------------------------------


def _kv_ceiling(step: StepModel, isl: int, osl: int) -> int:
    per = step.kv_bytes(isl + osl)
    if per <= 0:
        return MAX_CONCURRENCY
    return min(MAX_CONCURRENCY, int(math.floor(step.kv_capacity_bytes() / per + 1e-9)))


class Search(NamedTuple):
    """What the concurrency search found on one replica."""

    best: Estimate | None  # the most output tok/s among the points meeting the target
    first: Estimate | None  # concurrency 1 (None when not even one stream runs)
    ceiling: int  # KV ceiling
    error: str = ""  # why the backend refused a concurrency (a step shape that does not fit), if it did


def best_concurrency(step: StepModel, isl: int, osl: int, target: float, spec_k: int = 0,
                     spec_accept: float = 0.0, evaluate: Callable[[int], Estimate] | None = None) -> Search:
    """The largest concurrency at which every user gets >= `target`, up to the KV ceiling.

    A concurrency the backend refuses (e.g. a compiled step shape that overflows SRAM) counts as missing
    the target. `evaluate(c)`: how a concurrency is priced (default: the stagger steady state of `step`; the
    search passes the engine's answer for one replica, `engine.answer.replica_estimate`). `spec_k` > 0: speculative decoding (MTP), k drafted tokens per round at acceptance `spec_accept`.
    """
    ceiling = _kv_ceiling(step, isl, osl)
    if ceiling < 1:
        return Search(None, None, 0)
    cache: dict[int, Estimate | None] = {}
    errors: list[str] = []

    def ok(c: int) -> bool:
        if c not in cache:
            try:
                cache[c] = evaluate(c) if evaluate is not None else steady_state(
                    step, isl, osl, c, spec_k=spec_k, spec_accept=spec_accept, arrivals=ARRIVALS)
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


def _engine_edge(evaluate: Callable[[int], Estimate], guess: int, target: float) -> Estimate | None:
    """The engine's answer at the largest concurrency <= `guess` that meets `target`: the steady state's edge
    `guess` first, then halving to a point that meets it, then bisecting back up (the simulator answers some
    points, and each of its runs costs seconds: the search itself stays on the steady state)."""
    def meets(c: int) -> Estimate | None:
        try:
            e = evaluate(c)
        except UserError:
            return None
        return e if e.tok_s_user >= target else None

    hi, best = guess, meets(guess)
    if best is not None:
        return best
    lo = guess // 2
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


def _candidate(step: StepModel, layout: Layout, system: SystemSpec, isl: int, osl: int, target: float,
               spec: tuple[int, float] = (0, 0.0), model: ModelSpec | None = None,
               new_tokens: int | None = None, session=None) -> tuple[Candidate, Estimate | None]:
    evaluate = None
    if model is not None:  # priced as the engine answers one replica of it
        from lpxsim.engine.answer import replica_estimate
        from lpxsim.engine.deployment import Placed
        from lpxsim.engine.query import Deployment, SessionShape, Workload

        if session is None:
            session = None if new_tokens is None or new_tokens >= isl else SessionShape(isl - new_tokens, new_tokens, 2)
        placed = Placed(Deployment(system.name, step.chips), step, model, 1)
        wl = Workload(isl, osl, session)

        def evaluate(c: int) -> Estimate:
            return replica_estimate(placed, wl, c, *spec)

    priced = step if new_tokens is None or new_tokens >= isl else PrefixCachedStep(step, isl, new_tokens)
    # The concurrency is searched on the stagger steady state (fast), then the point found is priced as the
    # engine answers it (where the arrival pattern decides, the simulator: `engine.answer`), stepping down
    # until that answer meets the target too.
    best, first, ceiling, error = best_concurrency(priced, isl, osl, target, *spec)
    if evaluate is not None and first is not None and best is not None:
        first = evaluate(1)
        # with think time a replica holds more sessions than it streams: start from the most its KV holds
        guess = ceiling if session is not None and session.think_s > 0 else best.concurrency
        best = _engine_edge(evaluate, guess, target)
    chips = step.chips
    units = chips / system.chips_per_unit
    base = Candidate(layout=_layout_label(step), replica_layout=replica_layout_text(step), chips=chips, units=units,
                     power_w=step.power_w,
                     feasible=False, kv_max_concurrency=ceiling,
                     batch1_tok_s_user=first.tok_s_user if first else 0.0)
    if first is None:
        why = error or f"one {isl + osl:,}-token stream's KV does not fit"
        return replace(base, reason=why), None
    if best is None:
        return replace(base, reason=(
            f"{first.tok_s_user:,.0f} tok/s/user at concurrency 1 and {isl:,} context is below the "
            f"{target:,.0f} target")), None
    return replace(base, feasible=True, concurrency=best.concurrency, tok_s_user=best.tok_s_user,
                   tok_s_total=best.tok_s_total, tok_s_per_mw=best.tok_s_per_mw), best


def operating_point(
    model: ModelSpec,
    system: str,
    isl: int,
    osl: int,
    tok_s_user_target: float,
    weights: str = "fp8",
    kv: str = "bf16",
    kv_layout: str = "separate",
    backend: str = "auto",
    factory: StepFactory | None = None,
    layouts: list[Layout] | None = None,
    new_tokens: int | None = None,
    spec_k: int = 0,
    spec_accept: float = 0.0,
    framework: str = "sglang",
    session=None,
) -> OperatingPoint:
    """The most tok/s per MW one replica of `model` on `system` gives with every user at >= the target.

    `new_tokens`: input tokens each request prefills (the rest of `isl` is in the prefix cache, as in an
    agentic session's later turns); None prefills all of `isl`. `spec_k`, `spec_accept`: speculative
    decoding with the model's MTP head (k drafted tokens per round, per-token acceptance). `framework`:
    the GPU serving engine (sglang, trtllm, vllm) every GPU layout runs under; ignored on LPX. `session`: an
    agentic session (`engine.query.SessionShape`) whose later turns at `isl` are the requests: it sets
    `new_tokens`, and its think time makes the concurrency sessions held (each holding its KV) rather than
    streams.
    """
    if session is not None:
        new_tokens = min(isl, session.new_tokens)
    m, s = model, get_system(system)
    for name, v in (("context", isl), ("osl", osl)):
        if not isinstance(v, int) or v <= 0:
            raise UserError(name, f"expected a positive number of tokens, got {v!r}")
    if not tok_s_user_target > 0:
        raise UserError("target_tok_s_user", f"expected a positive tok/s per user, got {tok_s_user_target!r}")
    if not (isinstance(spec_k, int) and spec_k >= 0 and 0.0 <= spec_accept < 1.0):
        raise UserError("accept", f"expected draft length k >= 0 and acceptance in [0, 1), got {spec_k}, {spec_accept}")
    if new_tokens is not None and not (isinstance(new_tokens, int) and 0 < new_tokens <= isl):
        raise UserError("new_tokens", f"expected 1..{isl:,} new input tokens per request, got {new_tokens!r}")
    check_backend(backend)
    used, make = ("custom", factory) if factory is not None else ("project", engine_factory(isl, osl))
    head = dict(model=m.name, system=s.name, isl=isl, osl=osl, target_tok_s_user=float(tok_s_user_target),
                weights=weights, kv=kv, backend=used, unit_name=s.unit_name,
                new_tokens=isl if new_tokens is None else new_tokens, spec_k=spec_k, spec_accept=spec_accept,
                think_s=float(session.think_s) if session is not None else 0.0,
                session=session.label() if session is not None else (
                    "no prefix reuse" if new_tokens is None or new_tokens >= isl else
                    f"prefix cached: {new_tokens:,} new tokens a request"))
    reason = ""
    if layouts is None:
        layouts, reason = replica_layouts(m, s, isl + osl, weights, kv, kv_layout)
    if not layouts:
        return OperatingPoint(**head, feasible=False, reason=reason)
    if not s.is_lpu:
        from lpxsim.gpu.engine import framework_name

        fw = framework_name(framework)
        layouts = [replace(lay, framework=fw) for lay in layouts]
    found: list[tuple[Candidate, Estimate | None]] = []
    seen: set[tuple] = set()
    for lay in layouts:
        try:
            step = make(m, s.name, lay, weights, kv, kv_layout)
        except UserError as e:  # this size does not fit / is not a valid layout; try the next
            found.append((Candidate(layout=f"{lay.chips or lay.gpus} chips", chips=lay.chips or lay.gpus or 0,
                                    units=0.0, power_w=0.0, feasible=False, reason=str(e)), None))
            continue
        key = (step.name, step.chips, step.power_w)
        if key in seen:  # the backend resolved two layouts to the same replica
            continue
        seen.add(key)
        found.append(_candidate(step, lay, s, isl, osl, float(tok_s_user_target), (spec_k, spec_accept), m,
                                new_tokens, session))
    return _pick(head, found)


def _pick(head: dict, found: list[tuple[Candidate, Estimate | None]]) -> OperatingPoint:
    cands = [c for c, _ in found]
    best_user = max((c.batch1_tok_s_user for c in cands), default=0.0)
    ok = [(c, e) for c, e in found if e is not None]
    if not ok:
        fastest = max(cands, key=lambda c: c.batch1_tok_s_user, default=None)
        if fastest is not None and fastest.batch1_tok_s_user > 0:
            why = f"{fastest.reason} (fastest layout: {fastest.layout})"
        else:
            why = "; ".join(dict.fromkeys(c.reason for c in cands if c.reason)) or "no layout fits"
        return OperatingPoint(**head, feasible=False, best_tok_s_user=best_user, reason=why, candidates=cands)
    c, e = max(ok, key=lambda ce: (ce[0].tok_s_per_mw, -ce[0].chips))
    return OperatingPoint(
        **head, feasible=True, layout=c.layout, replica_layout=c.replica_layout, replica_chips=c.chips, replica_units=c.units,
        replica_power_w=c.power_w, concurrency=e.concurrency, tok_s_user=e.tok_s_user, tok_s_total=e.tok_s_total,
        tok_s_per_mw=e.tok_s_per_mw, ttft_s=e.ttft_s, e2e_s=e.e2e_s, requests_per_s=e.tok_s_total / e.osl,
        best_tok_s_user=best_user, candidates=cands,
    )
