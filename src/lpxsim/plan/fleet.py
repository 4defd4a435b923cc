"""Fleet sizing: how many racks of each system serve a demand at its per-user SLO, at least power (or cost).

Each request class (model, ISL, OSL, a per-user tok/s SLO, an optional TTFT P99
target, and a demand in requests/s or concurrent sessions) gets candidate pool
types: every way one replica can serve it. On every candidate system, the
operating point of `lpxsim.plan.operating_point` (one replica's layout, its
concurrency at the SLO and the requests/s it completes), without and, where the
class gives its MTP draft length and acceptance, with speculative decoding; and,
when the demand asks for `options` and Vera Rubin NVL72 and LPX are both
candidates, the three Rubin + LPX modes (PD, AFD, the external drafter) as
simulated by `lpxsim.plan.options` on the detailed backends: a replica of a mode
occupies racks of both systems. A pool type serves its class only where it meets
the per-user speed and the TTFT target. A mixed-integer program then chooses

    n_s  >= 0 integer   racks (units) of system s
    y_k  >= 0 integer   replicas of pool type k (k serves one class c(k))

    z_s  in {0, 1}      whether system s is used at all (it then carries its spares)

to minimise sum_s weight_s * (n_s + spare_s * z_s) (weight: the rack's power in
W, a user-given cost per rack, or the cost model's cost of ownership per hour)
subject to

    sum_{k of c} y_k * capacity_k >= demand_c     every class is served at its SLO
    sum_k y_k * units_ks          <= n_s          replicas fit in the racks bought
    n_s <= M_s * z_s                              a pool carries spares only when it exists
    n_s + spare_s * z_s <= max_racks_s            where the user caps a system
    sum_s (n_s + spare_s * z_s) <= max_total_racks               floor ceiling (optional)
    sum_s P_s * PUE * (n_s + spare_s * z_s) <= max_facility_w    power ceiling (optional)

solved with `scipy.optimize.milp` (HiGHS). capacity_k is requests/s (or
concurrent sessions) of one replica at the SLO. N+k redundancy: each pool (the
racks of one system) carries spare_s = k x the racks of its largest replica, so
losing any k replicas still serves the whole demand at its SLO. The BOM
(`lpxsim.plan.fleet_bom`) prices the racks with the cost model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from scipy.optimize import Bounds, LinearConstraint, milp

from lpxsim.catalog import get_system
from lpxsim.core.errors import UserError
from lpxsim.plan.costs import CostModel, default_costs, economics
from lpxsim.plan.operating_point import OperatingPoint, StepFactory, operating_point, plan_model

MILP_TIME_LIMIT_S = 60.0  # HiGHS solves fleets of a few classes and systems in milliseconds
TIE_BREAK = 1e-6  # relative objective weight of a replica's racks, below any whole-rack difference


@dataclass(frozen=True)
class RequestClass:
    """One kind of traffic with its SLO. Exactly one of requests_per_s / concurrent_sessions is set."""

    name: str
    model: str
    isl: int
    osl: int
    tok_s_user: float
    requests_per_s: float | None = None
    concurrent_sessions: float | None = None
    new_tokens: int | None = None  # input tokens prefilled per request (rest in the prefix cache); None: all
    mtp: int = 0  # speculative draft length (MTP head); 0: off
    accept: float = 0.0  # per-token draft acceptance
    ttft_p99_s: float | None = None  # TTFT P99 target beside the per-user speed target (serving options)

    @property
    def demand(self) -> float:
        return float(self.requests_per_s if self.requests_per_s is not None else self.concurrent_sessions or 0.0)

    @property
    def demand_unit(self) -> str:
        return "req/s" if self.requests_per_s is not None else "sessions"


@dataclass(frozen=True)
class SystemChoice:
    """A candidate system and what one of its racks weighs in the objective."""

    name: str
    cost_per_unit: float | None = None  # None: the objective uses the rack's power in W
    max_units: int | None = None  # cap on racks of this system in the fleet (spares included)
    redundancy: int = 0  # N+k: spare replicas (of the pool's largest replica) this pool carries


@dataclass(frozen=True)
class FleetLimits:
    """Floor-wide ceilings on the fleet (None: no ceiling)."""

    max_total_units: int | None = None  # racks (or nodes) of all systems, spares included
    max_facility_w: float | None = None  # facility power (IT power x PUE), spares included


@dataclass(frozen=True)
class Assignment:
    """Replicas of one class on one system, with the per-user speed, context and concurrency they hold."""

    request_class: str
    model: str
    system: str
    replicas: int
    units: float
    chips: int
    concurrency_per_replica: int
    context: int
    osl: int
    tok_s_user: float
    output_tok_s: float  # capacity of these replicas at their operating point
    served: float
    demand: float
    demand_unit: str
    layout: str
    delivered_output_tok_s: float = 0.0  # their share of the class's demand (replicas loaded evenly)
    input_tok_s: float = 0.0  # prefilled input tok/s of these replicas at their operating point
    delivered_input_tok_s: float = 0.0
    option: str = ""  # the pool type: the system, "<system>+mtp", or a Rubin + LPX mode (its share on `system`)


@dataclass(frozen=True)
class BomLine:
    system: str
    title: str
    unit_name: str
    units: int
    chips: int
    power_w: float
    power_source: str  # catalog provenance of the rack power: "source (grade)"
    used_units: float  # racks the replicas occupy (<= units; the rest is rounding and spares)
    output_tok_s: float = 0.0  # output tok/s these racks deliver for the demand
    tok_s_per_mw: float = 0.0
    spare_units: int = 0  # of `units`, the N+k spares
    input_tok_s: float = 0.0
    economics: dict = field(default_factory=dict)  # lpxsim.plan.costs.economics of the pool (spares included)


@dataclass
class FleetPlan:
    """A solved (or infeasible) fleet. `feasible` False comes with `reasons`."""

    feasible: bool
    objective: str
    bom: list[BomLine] = field(default_factory=list)
    assignments: list[Assignment] = field(default_factory=list)
    total_power_w: float = 0.0
    total_cost: float = 0.0
    output_tok_s: float = 0.0
    tok_s_per_mw: float = 0.0
    reasons: list[str] = field(default_factory=list)
    points: list[OperatingPoint] = field(default_factory=list)
    totals: dict = field(default_factory=dict)  # fleet economics (lpxsim.plan.fleet_bom.fleet_totals)
    options: list[dict] = field(default_factory=list)  # per class, every serving option (plan/options.py)

    def as_dict(self) -> dict:
        return {
            "feasible": self.feasible, "objective": self.objective,
            "bom": [b.__dict__ for b in self.bom], "assignments": [a.__dict__ for a in self.assignments],
            "total_power_w": self.total_power_w, "total_cost": self.total_cost, "output_tok_s": self.output_tok_s,
            "tok_s_per_mw": self.tok_s_per_mw, "reasons": self.reasons, **self.totals,
            "operating_points": [p.as_dict() for p in self.points], "options": self.options,
        }


def replica_capacity(rc: RequestClass, op: OperatingPoint) -> float:
    """Demand one replica serves at its operating point: requests/s (= concurrency / e2e) or sessions."""
    if not op.feasible:
        return 0.0
    return op.requests_per_s if rc.requests_per_s is not None else float(op.concurrency)


@dataclass(frozen=True)
class PoolType:
    """One way to serve one class: what one replica serves at the class's targets and the racks it occupies.

    A single-system operating point occupies racks of one system; a Rubin + LPX mode racks of both.
    `capacity` is 0 where the pool type misses the per-user speed or the TTFT target (`reason` says which)."""

    request_class: str
    option: str
    method: str
    capacity: float
    units: dict[str, float]  # racks of each system one replica occupies
    chips: dict[str, int]
    model: str
    tok_s_user: float
    output_tok_s: float  # of one replica at its operating point
    requests_per_s: float
    concurrency: int
    layout: str
    power_w: float  # of one replica
    ttft_s: float = math.nan
    reason: str = ""

    @property
    def feasible(self) -> bool:
        return self.capacity > 0

    @property
    def tok_s_per_mw(self) -> float:
        return self.output_tok_s / (self.power_w / 1e6) if self.power_w > 0 else 0.0


def point_pool_type(rc: RequestClass, op: OperatingPoint, option: str | None = None) -> PoolType:
    """The pool type of one operating point, judged against the class's TTFT target as well."""
    cap, reason = replica_capacity(rc, op), op.reason
    if cap > 0 and rc.ttft_p99_s is not None and not op.ttft_s <= rc.ttft_p99_s:
        cap, reason = 0.0, f"TTFT {op.ttft_s:,.2f} s > {rc.ttft_p99_s:g} s"
    method = "operating point (steady state at the target)" + (f", MTP k={op.spec_k}" if op.spec_k else "")
    return PoolType(rc.name, option or op.system, method, cap, {op.system: op.replica_units if cap > 0 else 0.0},
                    {op.system: op.replica_chips}, op.model, op.tok_s_user, op.tok_s_total, op.requests_per_s,
                    op.concurrency, op.layout, op.replica_power_w, op.ttft_s, reason)


OBJECTIVES = ("auto", "power", "tco")


def _weights(systems: list[SystemChoice], objective: str = "auto", costs: CostModel | None = None
             ) -> tuple[np.ndarray, str]:
    """Objective weight per rack: power (W), the user's cost_per_rack, or the cost model's $/h of ownership."""
    if objective not in OBJECTIVES:
        raise UserError("objective", f"expected one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if objective == "tco":
        c = costs or default_costs()
        w = []
        for sc in systems:
            s = get_system(sc.name)
            e = economics(float(s.power_w), 1.0, s.name, 0.0, 0.0, 0.0, c)
            if e["cost_usd_per_hour"] is None:
                raise UserError("objective", f"tco needs a capex for {s.name} in the cost model (--costs)")
            w.append(e["cost_usd_per_hour"])
        return np.array(w), "tco"
    given = [s.cost_per_unit for s in systems]
    if objective == "power" or all(c is None for c in given):
        return np.array([float(get_system(s.name).power_w) for s in systems]), "power"
    if any(c is None for c in given):
        raise UserError("systems.cost_per_rack", "give cost_per_rack for every system, or for none (minimise power)")
    return np.array(given, dtype=float), "cost"


def spare_units(sc: SystemChoice, units: np.ndarray, cap: np.ndarray) -> int:
    """Racks of N+k spares for one pool: k x the racks of its largest replica (whole racks)."""
    if sc.redundancy <= 0:
        return 0
    sizes = [u for u, c in zip(units, cap, strict=True) if c > 0]
    return sc.redundancy * math.ceil(max(sizes) - 1e-9) if sizes else 0


@dataclass(frozen=True)
class _Vars:
    """Column layout of the MILP: n_s (serving racks), then y_k (replicas of each pool type), then z_s."""

    n_k: int
    n_s: int

    @property
    def count(self) -> int:
        return 2 * self.n_s + self.n_k

    def n(self, j: int) -> int:
        return j

    def y(self, k: int) -> int:
        return self.n_s + k

    def z(self, j: int) -> int:
        return self.n_s + self.n_k + j


def _capacity(types: list[PoolType], systems: list[SystemChoice]) -> tuple[np.ndarray, np.ndarray]:
    """(demand one replica serves, racks of each system one replica occupies) per pool type."""
    cap = np.array([t.capacity for t in types], dtype=float)
    units = np.array([[t.units.get(sc.name, 0.0) if t.capacity > 0 else 0.0 for sc in systems] for t in types],
                     dtype=float).reshape(len(types), len(systems))
    return cap, units


def _constraints(classes: list[RequestClass], systems: list[SystemChoice], types: list[PoolType], v: _Vars,
                 cap: np.ndarray, units: np.ndarray, spares: np.ndarray, limits: FleetLimits, costs: CostModel
                 ) -> list[LinearConstraint]:
    """Demand, fit, pool-used link, per-system caps and the floor ceilings (one block each)."""
    n_s = len(systems)
    index = {rc.name: i for i, rc in enumerate(classes)}
    demand = np.zeros((len(classes), v.count))  # every class served at its SLO
    fit = np.zeros((n_s, v.count))  # replicas fit in the serving racks bought
    for k, t in enumerate(types):
        demand[index[t.request_class], v.y(k)] = cap[k]
        for j in range(n_s):
            fit[j, v.y(k)] = units[k, j]
    racks = np.zeros((n_s, v.count))  # racks of each pool, spares included
    link = np.zeros((n_s, v.count))  # serving racks only in a pool that exists (it then carries spares)
    big = _pool_bound(classes, systems, types, cap, units)
    for j in range(n_s):
        fit[j, v.n(j)] = -1.0
        racks[j, v.n(j)], racks[j, v.z(j)] = 1.0, spares[j]
        link[j, v.n(j)], link[j, v.z(j)] = 1.0, -big[j]
    caps = np.array([np.inf if sc.max_units is None else sc.max_units for sc in systems])
    rows = [
        LinearConstraint(demand, np.array([rc.demand for rc in classes]), np.inf),
        LinearConstraint(fit, -np.inf, 0.0),
        LinearConstraint(link, -np.inf, 0.0),
        LinearConstraint(racks, -np.inf, caps),
    ]
    if limits.max_total_units is not None:
        rows.append(LinearConstraint(racks.sum(axis=0)[None, :], -np.inf, limits.max_total_units))
    if limits.max_facility_w is not None:
        fac = np.array([float(get_system(sc.name).power_w) * costs.pue.value for sc in systems])
        rows.append(LinearConstraint((fac[:, None] * racks).sum(axis=0)[None, :], -np.inf, limits.max_facility_w))
    return rows


def solve_fleet(
    classes: list[RequestClass],
    systems: list[SystemChoice],
    points: dict[tuple[str, str], OperatingPoint],
    limits: FleetLimits | None = None,
    costs: CostModel | None = None,
    objective: str = "auto",
    pool_types: list[PoolType] | None = None,
) -> FleetPlan:
    """Choose racks, spares and replicas of each pool type. `points`: operating points keyed by (class name,
    system name); `pool_types` (default: one per point) every candidate way to serve a class."""
    if not classes:
        raise UserError("classes", "the demand has no request classes")
    if not systems:
        raise UserError("systems", "no candidate systems")
    limits = limits or FleetLimits()
    costs = costs or default_costs()
    weight, objective = _weights(systems, objective, costs)
    if pool_types is None:
        pool_types = [point_pool_type(rc, points[(rc.name, sc.name)]) for rc in classes for sc in systems]
    names = {sc.name for sc in systems}
    types = [t for t in pool_types if set(t.units) <= names]  # only pool types on the candidate systems
    options = option_table(classes, types)
    reasons = _unservable(classes, systems, points, types)
    if reasons:
        return FleetPlan(False, objective, reasons=reasons, points=list(points.values()), options=options)
    cap, units = _capacity(types, systems)
    spares = np.array([spare_units(sc, units[:, j], cap) for j, sc in enumerate(systems)], dtype=float)
    v = _Vars(len(types), len(systems))
    # objective: racks and spares by weight, plus a tiny charge per replica-rack so that among fleets of
    # equal weight no replica the demand does not need is assigned
    c = np.concatenate([weight, TIE_BREAK * units @ weight, weight * spares])
    upper = np.full(v.count, np.inf)
    for j in range(len(systems)):
        upper[v.z(j)] = 1.0
    for k in range(len(types)):
        if cap[k] <= 0:
            upper[v.y(k)] = 0.0  # this pool type cannot serve its class at its targets
    res = milp(
        c, integrality=np.ones(v.count), bounds=Bounds(np.zeros(v.count), upper),
        constraints=_constraints(classes, systems, types, v, cap, units, spares, limits, costs),
        options={"mip_rel_gap": 0.0, "time_limit": MILP_TIME_LIMIT_S},
    )
    if res.status != 0 or res.x is None:
        why = ("the racks and power allowed (max_racks, max_total_racks, max_facility_kw) cannot serve the demand "
               "at its SLOs with its spares" if res.status == 2 else res.message)
        return FleetPlan(False, objective, reasons=[f"no fleet found: {why}"], points=list(points.values()),
                         options=options)
    x = np.round(res.x).astype(int)
    from lpxsim.plan.fleet_bom import assemble_plan  # the BOM builds on this module's types

    n_s = len(systems)
    serving = np.array([x[v.n(j)] for j in range(n_s)])
    replicas = np.array([x[v.y(k)] for k in range(len(types))], dtype=int)
    racks = np.array([serving[j] + (spares[j] if x[v.z(j)] else 0) for j in range(n_s)], dtype=int)
    plan = assemble_plan(classes, systems, points, types, serving, racks, replicas, units, weight, objective, costs)
    plan.options = option_table(classes, types, replicas)
    return plan


def option_table(classes: list[RequestClass], types: list[PoolType], replicas: np.ndarray | None = None
                 ) -> list[dict]:
    """Per class, every pool type with its speed, TTFT, tok/s per MW and whether it meets the targets, and
    the replicas of it the MILP chose (`chosen`: the options in the fleet)."""
    out = []
    for rc in classes:
        rows = []
        for k, t in enumerate(types):
            if t.request_class != rc.name:
                continue
            hw = " + ".join(f"{n:,} {s}" for s, n in t.chips.items())
            rows.append({"option": t.option, "method": t.method, "feasible": t.feasible, "reason": t.reason,
                         "tok_s_user": t.tok_s_user, "ttft_s": t.ttft_s, "tok_s_per_mw": t.tok_s_per_mw,
                         "concurrency": t.concurrency, "hardware": f"{hw}, {t.power_w / 1e3:,.0f} kW",
                         "units": t.units, "replicas": 0 if replicas is None else int(replicas[k])})
        chosen = [r["option"] for r in rows if r["replicas"] > 0]
        out.append({"class": rc.name, "model": rc.model, "context": rc.isl, "target_tok_s_user": rc.tok_s_user,
                    "target_ttft_p99_s": rc.ttft_p99_s, "chosen": chosen, "options": rows})
    return out


def _pool_bound(classes: list[RequestClass], systems: list[SystemChoice], types: list[PoolType], cap: np.ndarray,
                units: np.ndarray) -> np.ndarray:
    """An upper bound on each pool's serving racks: every pool type alone serving its whole class, or the cap."""
    demand = {rc.name: rc.demand for rc in classes}
    out = np.zeros(len(systems))
    for j, sc in enumerate(systems):
        need = sum(math.ceil(demand[t.request_class] / cap[k]) * units[k, j]
                   for k, t in enumerate(types) if cap[k] > 0)
        out[j] = math.ceil(need) + 1 if sc.max_units is None else sc.max_units
    return out


def _unservable(classes: list[RequestClass], systems: list[SystemChoice],
                points: dict[tuple[str, str], OperatingPoint], types: list[PoolType]) -> list[str]:
    """One line per class that no pool type serves at its targets (with the best speed on offer)."""
    out = []
    for rc in classes:
        if rc.demand <= 0 or any(t.capacity > 0 for t in types if t.request_class == rc.name):
            continue
        ops = [points[(rc.name, s.name)] for s in systems if (rc.name, s.name) in points]
        best = ", ".join(f"{op.system} {op.best_tok_s_user:,.0f}" for op in ops)
        ttft = "" if rc.ttft_p99_s is None else f" within a TTFT of {rc.ttft_p99_s:g} s"
        out.append(
            f"class {rc.name!r} ({rc.model}, {rc.isl:,}-token context): no system or mode reaches "
            f"{rc.tok_s_user:,.0f} tok/s/user{ttft}; best at concurrency 1: {best} tok/s/user"
        )
    return out


# --- demand files and the end-to-end sizing ------------------------------------------------------


class ClassSpec(BaseModel):
    """A request class in a demand YAML."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: str
    model: str
    isl: int = Field(gt=0, le=10_000_000)  # ranges: lpxsim.core.inputs (issue 15)
    osl: int = Field(gt=0, le=10_000_000)
    tok_s_user: float = Field(gt=0, le=1e6)
    requests_per_s: float | None = Field(default=None, gt=0, le=1e9)
    concurrent_sessions: float | None = Field(default=None, gt=0, le=1e9)
    new_tokens: int | None = Field(default=None, gt=0, le=10_000_000)
    mtp: int = Field(default=0, ge=0, le=32)
    accept: float = Field(default=0.0, ge=0.0, lt=1.0)
    ttft_p99_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_demand(self) -> ClassSpec:
        if (self.requests_per_s is None) == (self.concurrent_sessions is None):
            raise ValueError("give exactly one of requests_per_s or concurrent_sessions")
        if self.new_tokens is not None and self.new_tokens > self.isl:
            raise ValueError(f"new_tokens {self.new_tokens:,} exceeds isl {self.isl:,}")
        return self


class SystemEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    cost_per_rack: float | None = Field(default=None, gt=0)
    max_racks: int | None = Field(default=None, ge=0)
    redundancy: int | None = Field(default=None, ge=0, le=64)  # N+k for this pool (default: the file's)


class DemandSpec(BaseModel):
    """A demand file: request classes, candidate systems, precisions."""

    model_config = ConfigDict(extra="forbid")
    classes: list[ClassSpec] = Field(min_length=1)
    systems: list[SystemEntry] = Field(default_factory=lambda: [SystemEntry(name=n) for n in DEFAULT_SYSTEMS])
    weights: str = "fp8"
    kv: str = "bf16"
    kv_layout: str = "separate"
    # the Rubin + LPX modes (PD, AFD, drafter) as pool types too, each simulated on the detailed backends
    # (needs vr-nvl72 and lpx among the systems; every system with and without MTP is always a pool type)
    options: bool = False
    redundancy: int = Field(default=0, ge=0, le=64)  # N+k spares per pool
    max_total_racks: int | None = Field(default=None, ge=0)
    max_facility_kw: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    objective: Literal["auto", "power", "tco"] = "auto"  # auto: power, or cost_per_rack when given

    def limits(self) -> FleetLimits:
        kw = self.max_facility_kw
        return FleetLimits(self.max_total_racks, None if kw is None else kw * 1e3)

    def request_classes(self) -> list[RequestClass]:
        names = [c.name for c in self.classes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise UserError("classes.name", f"duplicate class name(s): {', '.join(dup)}")
        return [RequestClass(c.name, c.model, c.isl, c.osl, c.tok_s_user, c.requests_per_s, c.concurrent_sessions,
                             c.new_tokens, c.mtp, c.accept, c.ttft_p99_s) for c in self.classes]

    def system_choices(self) -> list[SystemChoice]:
        return [SystemChoice(get_system(s.name).name, s.cost_per_rack, s.max_racks,
                             self.redundancy if s.redundancy is None else s.redundancy) for s in self.systems]


DEFAULT_SYSTEMS = ("lpx", "vr-nvl72", "gb200-nvl72")


def _field_path(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "demand"


def parse_demand(raw: object) -> DemandSpec:
    """Validate a parsed demand document; a mistake is one UserError naming the field."""
    if not isinstance(raw, dict):
        raise UserError("demand", "expected a mapping with a 'classes' list")
    try:
        return DemandSpec.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise UserError(_field_path(err["loc"]), err["msg"].removeprefix("Value error, ")) from None


def load_demand(path: str | Path) -> DemandSpec:
    """Read and validate a demand YAML file."""
    from lpxsim.core.structured import read_yaml as read_capped  # size, UTF-8, depth, number caps

    raw = read_capped(Path(path), "demand")
    return parse_demand(raw)


def size_fleet(
    demand: DemandSpec,
    systems: list[str] | None = None,
    backend: str = "auto",
    factory: StepFactory | None = None,
    costs: CostModel | None = None,
) -> FleetPlan:
    """Operating points for every (class, system), then the least-power (cost, TCO) integer fleet with spares."""
    if demand.objective not in OBJECTIVES:
        raise UserError("objective", f"expected one of {', '.join(OBJECTIVES)}, got {demand.objective!r}")
    choices = demand.system_choices()
    if systems is not None:
        given = {c.name: c for c in choices}
        choices = [given.get(get_system(n).name, SystemChoice(get_system(n).name, redundancy=demand.redundancy))
                   for n in systems]
    classes = demand.request_classes()
    for i, rc in enumerate(classes):  # name the demand file's field for an unknown model, before any costly work
        try:
            plan_model(rc.model)
        except UserError as e:
            raise UserError(f"classes.{i}.model", e.message) from None
    points: dict[tuple[str, str], OperatingPoint] = {}
    types: list[PoolType] = []
    for rc in classes:
        for sc in choices:
            for k in ((0, rc.mtp) if rc.mtp > 0 and rc.accept > 0 else (0,)):
                op = operating_point(
                    rc.model, sc.name, rc.isl, rc.osl, rc.tok_s_user, weights=demand.weights, kv=demand.kv,
                    kv_layout=demand.kv_layout, backend=backend, factory=factory, new_tokens=rc.new_tokens,
                    spec_k=k, spec_accept=rc.accept if k else 0.0,
                )
                if k == 0:
                    points[(rc.name, sc.name)] = op
                types.append(point_pool_type(rc, op, sc.name + ("+mtp" if k else "")))
    names = {sc.name for sc in choices}
    if demand.options and {"vr-nvl72", "lpx"} <= names:
        from lpxsim.plan.options import mode_pool_types

        for rc in classes:
            types.extend(mode_pool_types(rc))
    return solve_fleet(classes, choices, points, demand.limits(), costs, demand.objective, pool_types=types)
