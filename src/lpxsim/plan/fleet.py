"""Fleet sizing: how many racks of each system serve a demand at its per-user SLO, at least power (or cost).

Each request class (model, ISL, OSL, a per-user tok/s SLO, and a demand in
requests/s or concurrent sessions) gets, on every candidate system, the
operating point of `lpxsim.plan.operating_point`: one replica's layout, its
concurrency at the SLO and the requests/s it completes. A mixed-integer program
then chooses

    n_s  >= 0 integer   racks (units) of system s
    y_cs >= 0 integer   replicas of class c on system s

to minimise sum_s weight_s * n_s (weight: the rack's power in W, or a
user-given cost per rack) subject to

    sum_s y_cs * capacity_cs >= demand_c          every class is served at its SLO
    sum_c y_cs * units_cs    <= n_s               replicas fit in the racks bought
    n_s <= max_racks_s                            where the user caps a system

solved with `scipy.optimize.milp` (HiGHS). capacity_cs is requests/s (or
concurrent sessions) of one replica at the SLO.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from scipy.optimize import Bounds, LinearConstraint, milp

from lpxsim.catalog import get_system
from lpxsim.errors import UserError
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
    max_units: int | None = None  # cap on racks of this system in the fleet


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


@dataclass(frozen=True)
class BomLine:
    system: str
    title: str
    unit_name: str
    units: int
    chips: int
    power_w: float
    power_source: str  # catalog provenance of the rack power: "source (grade)"
    used_units: float  # racks the replicas occupy (<= units; the rest is rounding)
    output_tok_s: float = 0.0  # output tok/s these racks deliver for the demand
    tok_s_per_mw: float = 0.0


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
    options: list[dict] = field(default_factory=list)  # per class, every serving option (plan/options.py)

    def as_dict(self) -> dict:
        return {
            "feasible": self.feasible, "objective": self.objective,
            "bom": [b.__dict__ for b in self.bom], "assignments": [a.__dict__ for a in self.assignments],
            "total_power_w": self.total_power_w, "total_cost": self.total_cost, "output_tok_s": self.output_tok_s,
            "tok_s_per_mw": self.tok_s_per_mw, "reasons": self.reasons,
            "operating_points": [p.as_dict() for p in self.points], "options": self.options,
        }


def replica_capacity(rc: RequestClass, op: OperatingPoint) -> float:
    """Demand one replica serves at its operating point: requests/s (= concurrency / e2e) or sessions."""
    if not op.feasible:
        return 0.0
    return op.requests_per_s if rc.requests_per_s is not None else float(op.concurrency)


def _weights(systems: list[SystemChoice]) -> tuple[np.ndarray, str]:
    costs = [s.cost_per_unit for s in systems]
    if all(c is None for c in costs):
        return np.array([float(get_system(s.name).power_w) for s in systems]), "power"
    if any(c is None for c in costs):
        raise UserError("systems.cost_per_rack", "give cost_per_rack for every system, or for none (minimise power)")
    return np.array(costs, dtype=float), "cost"


def solve_fleet(
    classes: list[RequestClass],
    systems: list[SystemChoice],
    points: dict[tuple[str, str], OperatingPoint],
) -> FleetPlan:
    """Choose racks and replica placement from operating points keyed by (class name, system name)."""
    if not classes:
        raise UserError("classes", "the demand has no request classes")
    if not systems:
        raise UserError("systems", "no candidate systems")
    weight, objective = _weights(systems)
    n_c, n_s = len(classes), len(systems)
    reasons = _unservable(classes, systems, points)
    if reasons:
        return FleetPlan(False, objective, reasons=reasons, points=list(points.values()))
    cap = np.zeros((n_c, n_s))
    units = np.zeros((n_c, n_s))
    for i, rc in enumerate(classes):
        for j, sc in enumerate(systems):
            op = points[(rc.name, sc.name)]
            cap[i, j] = replica_capacity(rc, op)
            units[i, j] = op.replica_units if op.feasible else 0.0
    # variables: n_s (n_s of them), then y_cs row-major (n_c * n_s)
    nv = n_s + n_c * n_s
    # a tiny charge per replica-rack: among fleets of equal weight, assign no replica the demand does not need
    c = np.concatenate([weight, (TIE_BREAK * units * weight[None, :]).ravel()])
    a_dem = np.zeros((n_c, nv))
    a_fit = np.zeros((n_s, nv))
    for i in range(n_c):
        for j in range(n_s):
            a_dem[i, n_s + i * n_s + j] = cap[i, j]
            a_fit[j, n_s + i * n_s + j] = units[i, j]
    for j in range(n_s):
        a_fit[j, j] = -1.0
    demand = np.array([rc.demand for rc in classes])
    upper = np.full(nv, np.inf)
    for j, sc in enumerate(systems):
        if sc.max_units is not None:
            upper[j] = sc.max_units
    for i in range(n_c):
        for j in range(n_s):
            if cap[i, j] <= 0:
                upper[n_s + i * n_s + j] = 0.0  # this system cannot serve this class at its SLO
    res = milp(
        c, integrality=np.ones(nv), bounds=Bounds(np.zeros(nv), upper),
        constraints=[LinearConstraint(a_dem, demand, np.inf), LinearConstraint(a_fit, -np.inf, 0.0)],
        options={"mip_rel_gap": 0.0, "time_limit": MILP_TIME_LIMIT_S},
    )
    if res.status != 0 or res.x is None:
        why = "the racks allowed (max_racks) cannot serve the demand at its SLOs" if res.status == 2 else res.message
        return FleetPlan(False, objective, reasons=[f"no fleet found: {why}"], points=list(points.values()))
    x = np.round(res.x).astype(int)
    return _plan(classes, systems, points, x, cap, units, weight, objective)


def _unservable(classes: list[RequestClass], systems: list[SystemChoice],
                points: dict[tuple[str, str], OperatingPoint]) -> list[str]:
    """One line per class that no candidate system serves at its SLO (with the best speed on offer)."""
    out = []
    for rc in classes:
        ops = [points[(rc.name, s.name)] for s in systems]
        if rc.demand > 0 and not any(replica_capacity(rc, op) > 0 for op in ops):
            best = ", ".join(f"{op.system} {op.best_tok_s_user:,.0f}" for op in ops)
            out.append(
                f"class {rc.name!r} ({rc.model}, {rc.isl:,}-token context): no system reaches {rc.tok_s_user:,.0f} "
                f"tok/s/user; best at concurrency 1: {best} tok/s/user"
            )
    return out


def _plan(classes: list[RequestClass], systems: list[SystemChoice], points: dict[tuple[str, str], OperatingPoint],
          x: np.ndarray, cap: np.ndarray, units: np.ndarray, weight: np.ndarray, objective: str) -> FleetPlan:
    n_s = len(systems)
    assignments: list[Assignment] = []
    used = np.zeros(n_s)
    for i, rc in enumerate(classes):
        for j, sc in enumerate(systems):
            y = int(x[n_s + i * n_s + j])
            if y == 0:
                continue
            op = points[(rc.name, sc.name)]
            used[j] += y * units[i, j]
            # the replicas are loaded only as far as the demand needs; report the SLO point they run at
            assignments.append(Assignment(
                request_class=rc.name, model=op.model, system=sc.name, replicas=y, units=float(y * units[i, j]),
                chips=y * op.replica_chips, concurrency_per_replica=op.concurrency, context=rc.isl, osl=rc.osl,
                tok_s_user=op.tok_s_user, output_tok_s=y * op.tok_s_total, served=float(y * cap[i, j]),
                demand=rc.demand, demand_unit=rc.demand_unit, layout=op.layout,
            ))
    assignments = _delivered(classes, assignments)
    bom = []
    for j, sc in enumerate(systems):
        n = int(x[j])
        if n == 0:
            continue
        s = get_system(sc.name)
        power_w = n * float(s.power_w)
        out = sum(a.delivered_output_tok_s for a in assignments if a.system == sc.name)
        bom.append(BomLine(
            system=s.name, title=s.title, unit_name=s.unit_name, units=n, chips=n * s.chips_per_unit,
            power_w=power_w, power_source=f"{s.power_w.source} ({s.power_w.grade})", used_units=float(used[j]),
            output_tok_s=out, tok_s_per_mw=out / (power_w / 1e6),
        ))
    power = sum(b.power_w for b in bom)
    out_tps = sum(a.delivered_output_tok_s for a in assignments)
    return FleetPlan(
        feasible=True, objective=objective, bom=bom, assignments=assignments, total_power_w=power,
        total_cost=float(np.dot(weight, x[:n_s])), output_tok_s=out_tps,
        tok_s_per_mw=out_tps / (power / 1e6) if power > 0 else 0.0, points=list(points.values()),
    )


def _delivered(classes: list[RequestClass], assignments: list[Assignment]) -> list[Assignment]:
    """Each assignment's output tok/s for the demand (not spare capacity): its capacity x the class's load."""
    load = {}
    for rc in classes:
        served = sum(a.served for a in assignments if a.request_class == rc.name)
        load[rc.name] = min(1.0, rc.demand / served) if served > 0 else 0.0
    return [replace(a, delivered_output_tok_s=a.output_tok_s * load[a.request_class]) for a in assignments]


# --- demand files and the end-to-end sizing ------------------------------------------------------


class ClassSpec(BaseModel):
    """A request class in a demand YAML."""

    model_config = ConfigDict(extra="forbid")
    name: str
    model: str
    isl: int = Field(gt=0)
    osl: int = Field(gt=0)
    tok_s_user: float = Field(gt=0)
    requests_per_s: float | None = Field(default=None, gt=0)
    concurrent_sessions: float | None = Field(default=None, gt=0)
    new_tokens: int | None = Field(default=None, gt=0)
    mtp: int = Field(default=0, ge=0)
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


class DemandSpec(BaseModel):
    """A demand file: request classes, candidate systems, precisions."""

    model_config = ConfigDict(extra="forbid")
    classes: list[ClassSpec] = Field(min_length=1)
    systems: list[SystemEntry] = Field(default_factory=lambda: [SystemEntry(name=n) for n in DEFAULT_SYSTEMS])
    weights: str = "fp8"
    kv: str = "bf16"
    kv_layout: str = "separate"
    options: bool = False  # also compare every serving option per class (Rubin +/- MTP, LPX, PD, AFD, drafter)

    def request_classes(self) -> list[RequestClass]:
        names = [c.name for c in self.classes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise UserError("classes.name", f"duplicate class name(s): {', '.join(dup)}")
        return [RequestClass(c.name, c.model, c.isl, c.osl, c.tok_s_user, c.requests_per_s, c.concurrent_sessions,
                             c.new_tokens, c.mtp, c.accept, c.ttft_p99_s) for c in self.classes]

    def system_choices(self) -> list[SystemChoice]:
        return [SystemChoice(get_system(s.name).name, s.cost_per_rack, s.max_racks) for s in self.systems]


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
    p = Path(path)
    if not p.is_file():
        raise UserError("demand", f"no such file {str(p)!r}")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserError("demand", f"{p.name} is not valid YAML{where}") from None
    return parse_demand(raw)


def size_fleet(
    demand: DemandSpec,
    systems: list[str] | None = None,
    backend: str = "auto",
    factory: StepFactory | None = None,
) -> FleetPlan:
    """Operating points for every (class, system), then the least-power (or least-cost) integer fleet."""
    choices = demand.system_choices()
    if systems is not None:
        given = {c.name: c for c in choices}
        choices = [given.get(get_system(n).name, SystemChoice(get_system(n).name)) for n in systems]
    classes = demand.request_classes()
    for i, rc in enumerate(classes):  # name the demand file's field for an unknown model, before any costly work
        try:
            plan_model(rc.model)
        except UserError as e:
            raise UserError(f"classes.{i}.model", e.message) from None
    points: dict[tuple[str, str], OperatingPoint] = {}
    for rc in classes:
        for sc in choices:
            points[(rc.name, sc.name)] = operating_point(
                rc.model, sc.name, rc.isl, rc.osl, rc.tok_s_user, weights=demand.weights, kv=demand.kv,
                kv_layout=demand.kv_layout, backend=backend, factory=factory, new_tokens=rc.new_tokens,
                spec_k=rc.mtp, spec_accept=rc.accept,
            )
    plan = solve_fleet(classes, choices, points)
    if demand.options:
        from lpxsim.plan.options import fleet_options

        plan.options = fleet_options(classes, demand.weights, demand.kv, demand.kv_layout, backend)
    return plan
