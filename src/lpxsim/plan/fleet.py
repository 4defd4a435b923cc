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

solved with `scipy.optimize.milp` (HiGHS, `lpxsim.plan.fleet_milp`). capacity_k
is requests/s (or concurrent sessions) of one replica at the SLO; units_ks the
racks of s one replica takes: whole racks, or 1/k of one where k replicas fit a
rack (`fleet_types.rack_share`), unless the demand allows a replica to straddle
two racks (`allow_straddle`; the plan says which). N+k redundancy: each pool (the
racks of one system) carries spare_s = k x the racks of its largest replica, so
losing any k replicas still serves the whole demand at its SLO. The BOM
(`lpxsim.plan.fleet_bom`) prices the racks with the cost model.

No feasible fleet is an answer of its own (`lpxsim plan fleet` exits 3): the plan
gives the reasons and the closest feasible alternative: a class no system serves at
its per-user target is sized again at the highest round target the fastest system
reaches; a fleet the rack or power ceilings forbid is sized without them.
Modules: `fleet_demand` (the demand file), `fleet_types` (the values),
`fleet_milp` (the program), `fleet_bom` (the priced BOM), this one (the sizing).
"""

from __future__ import annotations

import math
from dataclasses import replace

from lpxsim.catalog import get_system
from lpxsim.core.errors import UserError
from lpxsim.plan.costs import CostModel
from lpxsim.plan.fleet_demand import (
    DEFAULT_SYSTEMS,
    ClassSpec,
    DemandSpec,
    SystemEntry,
    load_demand,
    parse_demand,
)
from lpxsim.plan.fleet_milp import OBJECTIVES, option_table, solve_fleet, spare_units
from lpxsim.plan.fleet_types import (
    Assignment,
    BomLine,
    FleetLimits,
    FleetPlan,
    PoolType,
    RequestClass,
    SystemChoice,
    point_pool_type,
    rack_share,
    replica_capacity,
)
from lpxsim.plan.operating_point import OperatingPoint, StepFactory, operating_point, plan_model

__all__ = [  # the fleet API (its parts live in fleet_demand, fleet_types, fleet_milp, fleet_bom)
    "DEFAULT_SYSTEMS", "OBJECTIVES", "Assignment", "BomLine", "ClassSpec", "DemandSpec", "FleetLimits", "FleetPlan",
    "PoolType", "RequestClass", "SystemChoice", "SystemEntry", "closest_feasible", "load_demand", "option_table",
    "parse_demand", "point_pool_type", "rack_share", "replica_capacity", "size_fleet", "solve_fleet", "spare_units",
]


def size_fleet(
    demand: DemandSpec,
    systems: list[str] | None = None,
    backend: str = "auto",
    factory: StepFactory | None = None,
    costs: CostModel | None = None,
    closest: bool = True,
) -> FleetPlan:
    """Operating points for every (class, system), then the least-power (cost, TCO) integer fleet with spares;
    when none is feasible (and `closest`), the closest feasible alternative (`closest_feasible`)."""
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
                    kv_layout=demand.kv_layout, backend=backend, factory=factory,
                    new_tokens=rc.new_tokens if rc.session is None else None, session=rc.session,
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
    plan = solve_fleet(classes, choices, points, demand.limits(), costs, demand.objective, pool_types=types,
                       allow_straddle=demand.allow_straddle)
    if not plan.feasible and closest:
        plan.closest = closest_feasible(demand, plan, classes, choices, points, types, systems, backend, factory,
                                        costs)
    return plan


def round_target_below(tok_s_user: float) -> float:
    """The largest two-significant-digit target strictly below `tok_s_user` (396 -> 390, 1,234 -> 1,200):
    the closest round target a system that reaches `tok_s_user` at concurrency 1 meets."""
    step = 10.0 ** (math.floor(math.log10(tok_s_user)) - 1)
    v = math.floor(tok_s_user / step) * step
    if v >= tok_s_user:
        v -= step
    return v if v > 0 else tok_s_user / 2


def _best_offer(rc: RequestClass, choices: list[SystemChoice], points: dict[tuple[str, str], OperatingPoint],
                types: list[PoolType]) -> tuple[float, str]:
    """(the fastest per-user speed any pool type of `rc` reaches, the option that reaches it)."""
    best = [(points[(rc.name, sc.name)].best_tok_s_user, sc.name) for sc in choices if (rc.name, sc.name) in points]
    best += [(t.tok_s_user, t.option) for t in types if t.request_class == rc.name]
    return max(best, default=(0.0, ""))


def _fleet_summary(plan: FleetPlan) -> dict:
    racks = {b.system: b.units for b in plan.bom}
    return {"racks_by_system": racks, "total_racks": sum(racks.values()), "total_power_w": plan.total_power_w}


def closest_feasible(demand: DemandSpec, plan: FleetPlan, classes: list[RequestClass], choices: list[SystemChoice],
                     points: dict[tuple[str, str], OperatingPoint], types: list[PoolType],
                     systems: list[str] | None, backend: str, factory: StepFactory | None,
                     costs: CostModel | None) -> dict | None:
    """The closest feasible alternative to an infeasible plan, or None when there is none.

    A class that no pool type serves at its per-user target: the fleet sized again with that class at the
    highest round target below the fastest speed on offer ("vr-nvl72 reaches 396 tok/s/user; 313 racks at
    390"). Every class servable but the rack or power ceilings binding: the fleet without the ceilings."""
    stuck = [rc for rc in classes if rc.demand > 0 and not any(
        t.capacity > 0 for t in types if t.request_class == rc.name)]
    if stuck:
        lowered, offers = {}, {}
        for rc in stuck:
            best, where = _best_offer(rc, choices, points, types)
            if best <= 0:
                return None  # nothing serves it at any speed (it does not fit): no target helps
            lowered[rc.name], offers[rc.name] = round_target_below(best), (best, where)
        spec = demand.model_copy(update={"classes": [
            c.model_copy(update={"tok_s_user": lowered.get(c.name, c.tok_s_user)}) for c in demand.classes]})
        again = size_fleet(spec, systems=systems, backend=backend, factory=factory, costs=costs, closest=False)
        if not again.feasible:
            return None
        line = "; ".join(f"{offers[n][1]} reaches {offers[n][0]:,.0f} tok/s/user for class {n!r}" for n in lowered)
        summary = _fleet_summary(again)
        targets = ", ".join(f"{n!r} at {t:,.0f}" for n, t in lowered.items())
        return {"kind": "target", "targets": lowered,
                "best": {n: {"tok_s_user": b, "option": w} for n, (b, w) in offers.items()}, **summary,
                "line": f"{line}; {summary['total_racks']:,} racks with {targets} tok/s/user"}
    free = solve_fleet(classes, [replace(sc, max_units=None) for sc in choices], points, FleetLimits(), costs,
                       demand.objective, pool_types=types, allow_straddle=demand.allow_straddle)
    if not free.feasible:
        return None
    summary = _fleet_summary(free)
    facility_kw = free.totals.get("facility_kw") or 0.0
    return {"kind": "limits", **summary, "facility_kw": facility_kw,
            "line": (f"without the rack and power ceilings the demand needs {summary['total_racks']:,} racks "
                     f"({', '.join(f'{n:,} {s}' for s, n in summary['racks_by_system'].items())}), "
                     f"{facility_kw:,.0f} kW facility")}
