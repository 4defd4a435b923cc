"""The fleet MILP: racks, spares and replicas of each pool type at least weight (`lpxsim.plan.fleet` states it).

Solved with `scipy.optimize.milp` (HiGHS). A replica's racks are `fleet_types.rack_share` of its size: whole
racks unless the demand allows replicas to straddle racks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from lpxsim.catalog import get_system
from lpxsim.core.errors import UserError
from lpxsim.plan.costs import CostModel, default_costs, economics
from lpxsim.plan.fleet_bom import assemble_plan
from lpxsim.plan.fleet_types import (
    FleetLimits,
    FleetPlan,
    PoolType,
    RequestClass,
    SystemChoice,
    point_pool_type,
    rack_share,
)
from lpxsim.plan.operating_point import OperatingPoint

MILP_TIME_LIMIT_S = 60.0  # HiGHS solves fleets of a few classes and systems in milliseconds
TIE_BREAK = 1e-6  # relative objective weight of a replica's racks, below any whole-rack difference


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


def _capacity(types: list[PoolType], systems: list[SystemChoice], allow_straddle: bool = False
              ) -> tuple[np.ndarray, np.ndarray]:
    """(demand one replica serves, racks of each system one replica takes: `rack_share`) per pool type."""
    cap = np.array([t.capacity for t in types], dtype=float)
    units = np.array([[rack_share(t.units.get(sc.name, 0.0), allow_straddle) if t.capacity > 0 else 0.0
                       for sc in systems] for t in types], dtype=float).reshape(len(types), len(systems))
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
    allow_straddle: bool = False,
) -> FleetPlan:
    """Choose racks, spares and replicas of each pool type. `points`: operating points keyed by (class name,
    system name); `pool_types` (default: one per point) every candidate way to serve a class;
    `allow_straddle`: a replica may span two racks (else it keeps to whole racks, `rack_share`)."""
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
        return FleetPlan(False, objective, reasons=reasons, points=list(points.values()), options=options,
                         allow_straddle=allow_straddle)
    cap, units = _capacity(types, systems, allow_straddle)
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
                         options=options, allow_straddle=allow_straddle)
    x = np.round(res.x).astype(int)
    n_s = len(systems)
    serving = np.array([x[v.n(j)] for j in range(n_s)])
    replicas = np.array([x[v.y(k)] for k in range(len(types))], dtype=int)
    racks = np.array([serving[j] + (spares[j] if x[v.z(j)] else 0) for j in range(n_s)], dtype=int)
    plan = assemble_plan(classes, systems, points, types, serving, racks, replicas, units, weight, objective, costs)
    plan.options = option_table(classes, types, replicas)
    plan.allow_straddle = allow_straddle
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

