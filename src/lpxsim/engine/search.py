"""The deployment search: the replica layout and load that best serve a stated objective, and the Pareto set.

Given a model, a system, an input context (ISL), an output length (OSL), a per-user speed target and an
objective, try the replica layouts of `engine.layouts` (LPX: chip counts from the fewest that place the model
up to whole racks, each with the compiler's tp/stages/kvsplit/kvspread pick; GPUs: TP, EP, PP, attention-DP
and KV-parallel layouts, each a replica of a domain), price each as the engine answers one replica of it
(`engine.answer.replica_estimate`: prefill and queueing included), and rank them by the objective:

- **efficiency** (the default): the most tok/s per MW with every user at >= the target, at the largest
  concurrency that still meets it (other users' prefills count in every user's TPOT, and the prefill's
  chip time in the cycle);
- **latency**: the shortest request at one user, E2E = TTFT + (OSL - 1) x TPOT, among the layouts whose one
  user meets the target. E2E, not the decode period: a layout with a 145 ms prefill does not win on a
  faster token period;
- **throughput**: the most output tok/s per chip with every user at >= the target (replicas tile the
  hardware, so per chip is the throughput of a fixed amount of it).

Every candidate's one-user point and its point at the target form the search's points; `OperatingPoint.pareto`
holds those no other beats on both per-user speed and tok/s per MW (the menu a planner chooses from).

The concurrency search (`engine.concurrency`) runs on the stagger steady state; the point found is then priced
as the engine answers it, stepping down until that answer meets the target too. GPU layouts are screened
first on the steady state alone (cheap) and only the non-dominated ones are priced by the engine; an LPX
layout's pricing is its compiles, so its sizes are pruned before anything compiles (`engine.layouts`).
`plan point` is a thin caller (`lpxsim.plan.operating_point`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from lpxsim.backends.factory import Layout
from lpxsim.catalog import get_system
from lpxsim.core.errors import UserError
from lpxsim.engine.concurrency import (  # noqa: F401  (re-exported: the search's public names)
    ARRIVALS,
    MAX_CONCURRENCY,
    Search,
    arrivals_for,
    best_concurrency,
    engine_edge,
    kv_ceiling,
)
from lpxsim.engine.layouts import (  # noqa: F401  (re-exported)
    MAX_LPX_SIZES,
    MAX_REPLICA_SIZES,
    lpx_sizes,
    no_spread_variant,
    replica_layouts,
    wide_ep_layout,
)
from lpxsim.engine.pareto import dominates, nondominated
from lpxsim.engine.prefix import PrefixCachedStep
from lpxsim.engine.query import Objective
from lpxsim.engine.steady_state import Estimate, steady_state
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec
from lpxsim.step.protocol import StepModel

# (model, system, layout, weights, kv, kv_layout) -> the StepModel of one replica.
StepFactory = Callable[[ModelSpec, str, Layout, str, str, str], StepModel]


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
    batch1_ttft_s: float = 0.0  # at concurrency 1: the engine's TTFT and E2E (the latency objective's score)
    batch1_e2e_s: float = 0.0
    batch1_tok_s_per_mw: float = 0.0
    ttft_s: float = 0.0  # at the point meeting the target
    e2e_s: float = 0.0


@dataclass(frozen=True)
class ParetoPoint:
    """One operating point of the search (a layout at a concurrency), as the engine answers it."""

    layout: str
    replica_layout: str
    chips: int
    concurrency: int
    tok_s_user: float
    tok_s_total: float
    tok_s_per_mw: float
    ttft_s: float
    e2e_s: float


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
    notes: tuple[str, ...] = ()  # what the figures do not say by themselves (a context past the model's window)
    objective: str = Objective.EFFICIENCY.value  # what the layouts were ranked by (module docstring)
    candidates: list[Candidate] = field(default_factory=list)
    # the points no other point beats on both tok/s per user and tok/s per MW, fastest per user first
    pareto: list[ParetoPoint] = field(default_factory=list)

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("candidates", "pareto")}
        d["context"] = self.isl
        d["candidates"] = [c.__dict__ for c in self.candidates]
        d["pareto"] = [p.__dict__ for p in self.pareto]
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
            dep = Deployment(system, n, layout=layout.lpx_layout or "", given=True)
        else:
            lay = gpu_layout_text(layout.tp, layout.ep, layout.pp, layout.dp_attention,
                                  layout.kv_parallel) if layout.tp else ""
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


# --- labels ------------------------------------------------------------------------------------


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



# --- one candidate --------------------------------------------------------------------------------

Found = tuple[Candidate, Estimate | None, Estimate | None]  # the candidate, its point at the target, at one user


def _candidate(step: StepModel, system: SystemSpec, isl: int, osl: int, target: float,
               spec: tuple[int, float] = (0, 0.0), model: ModelSpec | None = None,
               new_tokens: int | None = None, session=None) -> Found:
    """One replica's one-user point and its point at the target. With `model`, both are priced as the engine
    answers one replica (`engine.answer.replica_estimate`); without, on the stagger steady state (the screen)."""
    evaluate, held = None, None
    if model is not None:
        from lpxsim.engine.answer import ceiling_for, replica_estimate
        from lpxsim.engine.deployment import Placed
        from lpxsim.engine.query import Deployment, SessionShape, Workload

        if session is None:
            session = None if new_tokens is None or new_tokens >= isl else SessionShape(isl - new_tokens, new_tokens, 2)
        placed = Placed(Deployment(system.name, step.chips), step, model, 1)
        wl = Workload(isl, osl, session)

        def evaluate(c: int) -> Estimate:
            return replica_estimate(placed, wl, c, *spec)

        with contextlib.suppress(UserError):  # one stream that does not fit: said by the pricing below
            held = ceiling_for(step, wl)  # what the engine admits on it (sessions: with the retention's headroom)

    priced = step if new_tokens is None or new_tokens >= isl else PrefixCachedStep(step, isl, new_tokens)
    # The concurrency is searched on the steady state the engine uses for this system (fast), then the point
    # found is priced as the engine answers it (on LPX where the arrival pattern decides, the simulator:
    # `engine.answer`), stepping down until that answer meets the target too.
    best, first, ceiling, error = best_concurrency(priced, isl, osl, target, *spec, arrivals=arrivals_for(system.name))
    if evaluate is not None and first is not None:
        first = evaluate(1)
        if best is not None:
            # with think time a replica holds more sessions than it streams: start from the most its KV holds
            guess = ceiling if session is not None and session.think_s > 0 else best.concurrency
            best = engine_edge(evaluate, guess, target)
    base = Candidate(layout=_layout_label(step), replica_layout=replica_layout_text(step), chips=step.chips,
                     units=step.chips / system.chips_per_unit, power_w=step.power_w, feasible=False,
                     kv_max_concurrency=ceiling if held is None else held)
    if first is None:
        return replace(base, reason=error or f"one {isl + osl:,}-token stream's KV does not fit"), None, None
    base = replace(base, batch1_tok_s_user=first.tok_s_user, batch1_ttft_s=first.ttft_s, batch1_e2e_s=first.e2e_s,
                   batch1_tok_s_per_mw=first.tok_s_per_mw)
    if best is None:
        return replace(base, reason=(
            f"{first.tok_s_user:,.0f} tok/s/user at concurrency 1 and {isl:,} context is below the "
            f"{target:,.0f} target")), None, first
    return replace(base, feasible=True, concurrency=best.concurrency, tok_s_user=best.tok_s_user,
                   tok_s_total=best.tok_s_total, tok_s_per_mw=best.tok_s_per_mw, ttft_s=best.ttft_s,
                   e2e_s=best.e2e_s), best, first


def _screen_scores(step: StepModel, isl: int, osl: int, spec: tuple[int, float],
                   new_tokens: int | None) -> tuple[float, ...] | None:
    """What a layout may win on, from two stagger steady states: one user's speed and request time (-E2E), and
    at its KV ceiling (the most streams it runs; aggregate rises with the load) tok/s per MW and per chip.
    None where one stream does not run (the full pricing says why)."""
    priced = step if new_tokens is None or new_tokens >= isl else PrefixCachedStep(step, isl, new_tokens)
    try:
        one = steady_state(priced, isl, osl, 1, spec_k=spec[0], spec_accept=spec[1], arrivals=ARRIVALS)
    except UserError:
        return None
    top = one
    ceiling = min(kv_ceiling(step, isl, osl), step.max_batch())
    if ceiling > 1:
        with contextlib.suppress(UserError):  # a batch the backend refuses: the one-user point stands
            top = steady_state(priced, isl, osl, ceiling, spec_k=spec[0], spec_accept=spec[1], arrivals=ARRIVALS)
    return (one.tok_s_user, -one.e2e_s, top.tok_s_per_mw, top.tok_s_total / max(1, step.chips))


def _screen(steps: list[tuple[Layout, StepModel]], isl: int, osl: int, spec: tuple[int, float],
            new_tokens: int | None) -> list[tuple[Layout, StepModel]]:
    """The layouts worth the search's pricing: those no other beats on every score of `_screen_scores` (GPU
    layouts cost no compiles, and two steady states of each are milliseconds; the concurrency search and the
    engine's answer, which may run the simulator, cost far more)."""
    if len(steps) <= 2:
        return steps
    scores = [_screen_scores(step, isl, osl, spec, new_tokens) for _, step in steps]
    known = [sc for sc in scores if sc is not None]
    keep = [sc is None or not any(dominates(o, sc) for o in known) for sc in scores]
    return [s for s, k in zip(steps, keep, strict=True) if k]


# --- the search -----------------------------------------------------------------------------------


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
    objective: Objective | str = Objective.EFFICIENCY,
    session=None,
) -> OperatingPoint:
    """The replica layout and concurrency of `model` on `system` that best serve `objective` with every user
    at >= the target, and the Pareto set of the layouts tried (module docstring: the objectives' rules).

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
    goal = _objective(objective)
    check_backend(backend)
    used, make = ("custom", factory) if factory is not None else ("project", engine_factory(isl, osl))
    head = dict(model=m.name, system=s.name, isl=isl, osl=osl, target_tok_s_user=float(tok_s_user_target),
                weights=weights, kv=kv, backend=used, unit_name=s.unit_name, objective=goal.value,
                new_tokens=isl if new_tokens is None else new_tokens, spec_k=spec_k, spec_accept=spec_accept,
                think_s=float(session.think_s) if session is not None else 0.0,
                session=session.label() if session is not None else (
                    "no prefix reuse" if new_tokens is None or new_tokens >= isl else
                    f"prefix cached: {new_tokens:,} new tokens a request"),
                notes=tuple(n for n in (m.window_note(isl + osl),) if n))
    reason = ""
    if layouts is None:
        layouts, reason = replica_layouts(m, s, isl + osl, weights, kv, kv_layout)
    if not layouts:
        return OperatingPoint(**head, feasible=False, reason=reason)
    if not s.is_lpu:
        from lpxsim.gpu.engine import framework_name

        fw = framework_name(framework)
        layouts = [replace(lay, framework=fw) for lay in layouts]
    spec, target = (spec_k, spec_accept), float(tok_s_user_target)
    failed, steps = _build(m, s, layouts, make, weights, kv, kv_layout)
    if not s.is_lpu:
        steps = _screen(steps, isl, osl, spec, new_tokens)
    found = failed + [_candidate(step, s, isl, osl, target, spec, m, new_tokens, session) for _, step in steps]
    return _pick(head, found, goal)


def _objective(objective: Objective | str) -> Objective:
    try:
        return Objective(objective)
    except ValueError:
        raise UserError("objective", f"expected one of {', '.join(o.value for o in Objective)}, "
                                     f"got {objective!r}") from None


def _build(m: ModelSpec, s: SystemSpec, layouts: list[Layout], make: StepFactory, weights: str, kv: str,
           kv_layout: str) -> tuple[list[Found], list[tuple[Layout, StepModel]]]:
    """Each layout's replica step model, once per distinct replica (two layouts the backend resolves alike are
    one); on LPX, a size whose pick spreads KV is also tried without spreading (`engine.layouts`). Layouts that
    do not place become infeasible candidates with the reason."""
    failed: list[Found] = []
    steps: list[tuple[Layout, StepModel]] = []
    seen: set[tuple] = set()
    queue = list(layouts)
    while queue:
        lay = queue.pop(0)
        try:
            step = make(m, s.name, lay, weights, kv, kv_layout)
        except UserError as e:  # this size does not fit / is not a valid layout; try the next
            if lay.tp is None:  # an enumerated GPU layout that does not split is not worth a line
                failed.append((Candidate(layout=f"{lay.chips or lay.gpus} chips", chips=lay.chips or lay.gpus or 0,
                                         units=0.0, power_w=0.0, feasible=False, reason=str(e)), None, None))
            continue
        key = (step.name, step.chips, step.power_w)
        if key in seen:  # the backend resolved two layouts to the same replica
            continue
        seen.add(key)
        steps.append((lay, step))
        if s.is_lpu and (variant := no_spread_variant(lay, step.name)) is not None:
            queue.insert(0, variant)
    return failed, steps


def _rank(goal: Objective, c: Candidate) -> tuple:
    """The objective's score of a feasible candidate (larger wins; ties: fewer chips)."""
    if goal == Objective.LATENCY:
        return (-c.batch1_e2e_s, -c.chips)
    if goal == Objective.THROUGHPUT:
        return (c.tok_s_total / max(1, c.chips), -c.chips)
    return (c.tok_s_per_mw, -c.chips)


def _pick(head: dict, found: list[Found], goal: Objective = Objective.EFFICIENCY) -> OperatingPoint:
    cands = [c for c, _, _ in found]
    best_user = max((c.batch1_tok_s_user for c in cands), default=0.0)
    pareto = pareto_points(found)
    ok = [f for f in found if f[1] is not None]
    if not ok:
        fastest = max(cands, key=lambda c: c.batch1_tok_s_user, default=None)
        if fastest is not None and fastest.batch1_tok_s_user > 0:
            why = (f"{fastest.reason} (fastest layout: {fastest.layout}, holding {fastest.kv_max_concurrency:,} "
                   f"streams of {head['isl'] + head['osl']:,} tokens)")
        else:
            why = "; ".join(dict.fromkeys(c.reason for c in cands if c.reason)) or "no layout fits"
        return OperatingPoint(**head, feasible=False, best_tok_s_user=best_user, reason=why, candidates=cands,
                              pareto=pareto)
    c, best, first = max(ok, key=lambda f: _rank(goal, f[0]))
    e = first if goal == Objective.LATENCY else best  # latency: the one user the objective ranked
    return OperatingPoint(
        **head, feasible=True, layout=c.layout, replica_layout=c.replica_layout, replica_chips=c.chips,
        replica_units=c.units, replica_power_w=c.power_w, concurrency=e.concurrency, tok_s_user=e.tok_s_user,
        tok_s_total=e.tok_s_total, tok_s_per_mw=e.tok_s_per_mw, ttft_s=e.ttft_s, e2e_s=e.e2e_s,
        requests_per_s=e.tok_s_total / e.osl, best_tok_s_user=best_user, candidates=cands, pareto=pareto,
    )


def pareto_points(found: list[Found]) -> list[ParetoPoint]:
    """The search's points (each candidate at one user and at the target) that no other beats on both tok/s
    per user and tok/s per MW, fastest per user first."""
    pts = []
    for c, best, first in found:
        for e in (first, best):
            if e is not None:
                pts.append(ParetoPoint(c.layout, c.replica_layout, c.chips, e.concurrency, e.tok_s_user,
                                       e.tok_s_total, e.tok_s_per_mw, e.ttft_s, e.e2e_s))
    pts = list(dict.fromkeys(pts))
    keep = nondominated([(p.tok_s_user, p.tok_s_per_mw) for p in pts])
    return sorted((p for p, k in zip(pts, keep, strict=True) if k), key=lambda p: -p.tok_s_user)
