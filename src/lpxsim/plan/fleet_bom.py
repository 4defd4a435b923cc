"""The fleet's bill of materials, priced: cost and revenue of each pool and of the whole floor.

A pool is the racks of one system in a solved fleet, spares included. Its cost of ownership comes from
the cost model (`lpxsim.plan.costs.economics`) on the tokens it delivers for the demand (not its spare
capacity), so spares and rounding raise $/Mtok. Its revenue sums each assignment's tokens at the price
that applies to its system and per-user speed (`CostModel.price_for`); with no price source, none.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from lpxsim.catalog import get_system
from lpxsim.plan.costs import CostModel, economics, per_token_costs
from lpxsim.plan.fleet_types import Assignment, BomLine, FleetPlan, PoolType, RequestClass, SystemChoice
from lpxsim.plan.operating_point import OperatingPoint

_SUMMED = ("capex_usd", "capex_usd_per_hour", "opex_usd_per_hour", "energy_usd_per_hour", "cost_usd_per_hour",
           "facility_kw")


def revenue_usd_per_hour(system: str, out_tok_s: float, in_tok_s: float, tok_s_user: float,
                         costs: CostModel) -> float | None:
    """Revenue per owned hour of tokens served on `system` at `tok_s_user`, at the model's utilisation;
    None when no price source applies."""
    tier = costs.price_for(system, tok_s_user)
    if tier is None:
        return None
    earned = out_tok_s * tier.usd_per_mtok_output + in_tok_s * (tier.usd_per_mtok_input or 0.0)
    return 3600.0 * costs.utilisation.value * earned / 1e6


def pool_economics(system: str, units: int, power_w: float, assignments: list, costs: CostModel) -> dict[str, Any]:
    """Economics of one pool: cost on its delivered tokens, revenue at each assignment's price (if any)."""
    out = sum(a.delivered_output_tok_s for a in assignments)
    tin = sum(a.delivered_input_tok_s for a in assignments)
    e = economics(power_w, float(units), system, out, tin, 0.0, costs)
    earned = [revenue_usd_per_hour(system, a.delivered_output_tok_s, a.delivered_input_tok_s, a.tok_s_user, costs)
              for a in assignments]
    for k in ("price_usd_per_mtok_output", "price_usd_per_mtok_input", "price_source"):
        e.pop(k)
    priced = [r for r in earned if r is not None]
    e["revenue_usd_per_hour"] = sum(priced) if priced else None
    e["revenue_usd_per_hour_per_mw_facility"] = (
        None if e["revenue_usd_per_hour"] is None
        else e["revenue_usd_per_hour"] / (e["facility_kw"] / 1e3) if e["facility_kw"] else 0.0)
    if e["cost_usd_per_hour"] is not None and e["revenue_usd_per_hour"] is not None:
        e["margin_usd_per_hour"] = e["revenue_usd_per_hour"] - e["cost_usd_per_hour"]
    return e


def fleet_totals(bom: list, costs: CostModel) -> dict[str, Any]:
    """Floor totals: racks by kind, spares, capex, facility kW, cost and revenue per hour, fleet $/Mtok."""
    tot: dict[str, Any] = {k: 0.0 for k in _SUMMED}
    priced = all(b.economics.get("cost_usd_per_hour") is not None for b in bom)
    for b in bom:
        for k in _SUMMED:
            v = b.economics.get(k)
            tot[k] = None if (v is None or tot[k] is None) else tot[k] + v
    out = sum(b.output_tok_s for b in bom)
    tin = sum(b.input_tok_s for b in bom)
    per_tok: dict[str, Any] = (per_token_costs(tot["cost_usd_per_hour"], out, tin, costs) if priced else
                               dict.fromkeys(("usd_per_mtok_output", "usd_per_mtok_input", "alloc_usd_per_mtok_output",
                                              "alloc_usd_per_mtok_input")))
    earned = [b.economics.get("revenue_usd_per_hour") for b in bom]
    tot["revenue_usd_per_hour"] = sum(r for r in earned if r is not None) if any(r is not None for r in earned) \
        else None
    return {
        **tot,
        "racks_by_system": {b.system: b.units for b in bom},
        "spare_units": sum(b.spare_units for b in bom),
        **per_tok,
        "tok_s_per_mw_facility": out / (tot["facility_kw"] / 1e3) if tot["facility_kw"] else 0.0,
        "input_tok_s": tin,
        "revenue_usd_per_hour_per_mw_facility": (
            None if tot["revenue_usd_per_hour"] is None
            else tot["revenue_usd_per_hour"] / (tot["facility_kw"] / 1e3) if tot["facility_kw"] else 0.0),
        "margin_usd_per_hour": (None if tot["revenue_usd_per_hour"] is None or tot["cost_usd_per_hour"] is None
                                else tot["revenue_usd_per_hour"] - tot["cost_usd_per_hour"]),
    }


def assemble_plan(classes: list[RequestClass], systems: list[SystemChoice],
                  points: dict[tuple[str, str], OperatingPoint], types: list[PoolType], serving: np.ndarray,
                  racks: np.ndarray, replicas: np.ndarray, units: np.ndarray, weight: np.ndarray, objective: str,
                  costs: CostModel) -> FleetPlan:
    """The solved fleet: assignments (per-user speed with context and concurrency), a priced BOM and totals.

    serving / racks: racks per system without / with spares; replicas: per pool type. A pool type on two
    systems (a Rubin + LPX mode) gives one assignment per system, its tokens split by the power it holds
    there (so each pool's economics carries its share)."""
    n_s = len(systems)
    assignments: list[Assignment] = []
    used = np.zeros(n_s)
    by_class = {rc.name: rc for rc in classes}
    for k, t in enumerate(types):
        y = int(replicas[k])
        if y == 0:
            continue
        rc = by_class[t.request_class]
        power = {j: units[k, j] * float(get_system(sc.name).power_w) for j, sc in enumerate(systems) if units[k, j] > 0}
        total = sum(power.values())
        for j, pw in power.items():
            sc, share = systems[j], pw / total
            used[j] += y * units[k, j]
            # the replicas are loaded only as far as the demand needs; report the SLO point they run at
            assignments.append(Assignment(
                request_class=rc.name, model=t.model, system=sc.name, replicas=y, units=float(y * units[k, j]),
                chips=y * t.chips.get(sc.name, 0), concurrency_per_replica=t.concurrency, context=rc.isl,
                osl=rc.osl, tok_s_user=t.tok_s_user, output_tok_s=y * t.output_tok_s * share,
                served=float(y * t.capacity * share), demand=rc.demand, demand_unit=rc.demand_unit, layout=t.layout,
                input_tok_s=y * t.requests_per_s * (rc.new_tokens or rc.isl) * share, option=t.option,
                workload=rc.workload_label,
                streams_decoding_per_replica=rc.streams_decoding(t.concurrency, t.requests_per_s),
            ))
    assignments = delivered(classes, assignments)
    bom = []
    for j, sc in enumerate(systems):
        n = int(racks[j])
        if n == 0:
            continue
        s = get_system(sc.name)
        power_w = n * float(s.power_w)
        mine = [a for a in assignments if a.system == sc.name]
        out = sum(a.delivered_output_tok_s for a in mine)
        tin = sum(a.delivered_input_tok_s for a in mine)
        bom.append(BomLine(
            system=s.name, title=s.title, unit_name=s.unit_name, units=n, chips=n * s.chips_per_unit,
            power_w=power_w, power_source=f"{s.power_w.source} ({s.power_w.grade})", used_units=float(used[j]),
            output_tok_s=out, tok_s_per_mw=out / (power_w / 1e6), spare_units=n - int(serving[j]), input_tok_s=tin,
            economics=pool_economics(s.name, n, power_w, mine, costs),
        ))
    power = sum(b.power_w for b in bom)
    out_tps = sum(a.delivered_output_tok_s for a in assignments)
    return FleetPlan(
        feasible=True, objective=objective, bom=bom, assignments=assignments, total_power_w=power,
        total_cost=float(np.dot(weight, racks)), output_tok_s=out_tps,
        tok_s_per_mw=out_tps / (power / 1e6) if power > 0 else 0.0, points=list(points.values()),
        totals=fleet_totals(bom, costs),
    )


def delivered(classes: list[RequestClass], assignments: list[Assignment]) -> list[Assignment]:
    """Each assignment's output tok/s for the demand (not spare capacity): its capacity x the class's load."""
    load = {}
    for rc in classes:
        served = sum(a.served for a in assignments if a.request_class == rc.name)
        load[rc.name] = min(1.0, rc.demand / served) if served > 0 else 0.0
    return [replace(a, delivered_output_tok_s=a.output_tok_s * load[a.request_class],
                    delivered_input_tok_s=a.input_tok_s * load[a.request_class]) for a in assignments]
