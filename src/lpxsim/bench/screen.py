"""Which LPX replica sizes a sweep prices: those that can reach the frontier over layouts.

The default sweep draws LPX at each context on the whole rack and on one replica of each smaller size of the
layout search's ladder tiled over the rack (`bench.sweep.grid`). Pricing a size is its compiles (about five on
a cold cache, ~3 CPU-s), nearly all of them for the one-user answer itself, so the engine cannot be asked
cheaply whether a size is worth pricing. The screen instead bounds what a size can reach, from its layout
search (already paid to know the layout) and one compiled step, a one-stream decode at the workload's full
context (a shape its pricing needs anyway), and skips the size when the rack's answers beat that bound:

- per-user speed: a user's token period is at least one decode step of a batch of one at the smallest
  context it decodes at (`isl`). A step's cost is affine in its context with a non-negative intercept (the
  step model's own rule, `lpu.stepmodel._near_point`), so the step at `isl` takes at least
  `isl / (isl + osl)` of the compiled one at `isl + osl`: `u_max = (isl + osl) / (isl x latency)`.
- aggregate: each of the C sessions the deployment holds (as many as its KV holds, `kv_fit x replicas`, with
  no batch cap: sessions in think time are held beyond the largest batch; more are not admitted) emits at most
  `osl` tokens a turn, and a turn lasts at least its think time plus `osl` token periods:
  `T_max = C x osl / (think_s + osl / u_max)` (the no-cache loop: `C x u_max`).

Every point of the size lies in the box [0, u_max] x [0, T_max] (and T_max over its power per MW); where one
point the engine answered for the rack dominates the box's corner on both frontiers (`bench.frontier`), no
point of the size can be on either, and the size is not priced. Never a second cost model: the bound only
decides what is priced; every drawn point is the engine's answer (`bench.sweep.evaluate_point`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from lpxsim.bench.store import PointStore
from lpxsim.core.errors import UserError
from lpxsim.engine.pareto import dominates


@dataclass(frozen=True)
class Screened:
    """A replica size the screen did not price, and why (the bound and the rack's point that beats it)."""

    target: str
    context: int
    replica_chips: int
    hardware: str
    tok_s_user_max: float
    tok_s_total_max: float
    beaten_by: str  # the rack's point: concurrency, tok/s/user, tok/s total

    def reason(self) -> str:
        return (f"{self.target} @ {self.context:,}: {self.hardware} reaches at most {self.tok_s_user_max:,.0f} "
                f"tok/s/user and {self.tok_s_total_max:,.0f} tok/s total; the rack's {self.beaten_by} beats that")


@dataclass(frozen=True)
class Bound:
    """The corner of the box every point of one deployment lies in (module docstring)."""

    tok_s_user: float
    tok_s_total: float
    power_w: float
    hardware: str

    def beaten_by(self, row: dict) -> bool:
        """Whether an answered point dominates the corner on both frontiers (vs aggregate and per MW)."""
        u, t, p = row.get("tok_s_user"), row.get("tok_s_total"), row.get("power_kw")
        if not (row.get("fits") and _finite(u, t, p)):
            return False
        corner = (self.tok_s_user, self.tok_s_total)
        per_mw = (self.tok_s_user, self.tok_s_total / self.power_w * 1e6)
        return dominates((u, t), corner) and dominates((u, t / (p * 1e3) * 1e6), per_mw)


def _finite(*xs) -> bool:
    return all(isinstance(x, (int, float)) and math.isfinite(x) for x in xs)


def size_bound(p: dict) -> Bound:
    """The box corner of the deployment a sweep point runs on (module docstring): its layout search and one
    compiled one-stream decode at the workload's full context. Raises UserError where it does not place."""
    from lpxsim.bench.sweep import placed_deployment, point_workload
    from lpxsim.engine.concurrency import kv_fit
    from lpxsim.step.protocol import DecodeBatch

    placed = placed_deployment(p)
    wl = point_workload(p)
    step = placed.step.decode_step(DecodeBatch.uniform(1, wl.context))
    u_max = wl.context / (wl.isl * step.latency_s)
    sessions = kv_fit(placed.step, wl.context) * placed.deployment.replicas
    t_max = sessions * wl.osl / (wl.think_s + wl.osl / u_max)
    return Bound(u_max, t_max, placed.deployment.power_w, placed.deployment.label())


def _rack_key(p: dict) -> tuple:
    """The (system, context, workload) a point belongs to: the rack's points there are its dominators."""
    return tuple(p.get(k) for k in ("model", "target", "context", "osl", "weights", "kv", "session", "framework"))


def screen_sizes(points: list[dict], store: PointStore, evaluate: Callable[[dict], dict]
                 ) -> tuple[list[dict], list[Screened]]:
    """The points worth pricing, and the replica sizes screened out (module docstring).

    Points with a `replica_chips` (an LPX size below the rack) are screened against the rack's points at the
    same system, context and workload; those rack points are answered first (and stored, so the sweep does
    not answer them again). A size that does not place is kept: its points carry the layout search's error."""
    racks: dict[tuple, list[dict]] = {}
    sizes: dict[tuple, list[dict]] = {}
    for p in points:
        if "replica_chips" in p:
            sizes.setdefault((*_rack_key(p), p["replica_chips"]), []).append(p)
        else:
            racks.setdefault(_rack_key(p), []).append(p)
    dropped: set[tuple] = set()
    screened: list[Screened] = []
    answered: dict[tuple, list[dict]] = {}
    for key, group in sizes.items():
        rack_key = key[:-1]
        if rack_key not in answered:
            answered[rack_key] = [_answer(q, store, evaluate) for q in racks.get(rack_key, [])]
        try:
            bound = size_bound(group[0])
        except UserError:
            continue
        beaters = [r for r in answered[rack_key] if bound.beaten_by(r)]
        if beaters:
            best = max(beaters, key=lambda r: (r["tok_s_total"], r["tok_s_user"]))
            dropped.add(key)
            screened.append(Screened(str(group[0]["target"]), int(group[0]["context"]), int(key[-1]),
                                     bound.hardware, bound.tok_s_user, bound.tok_s_total,
                                     f"{best['tok_s_user']:,.0f} tok/s/user and {best['tok_s_total']:,.0f} tok/s "
                                     f"total at concurrency {int(best['concurrency'])}"))
    kept = [p for p in points if "replica_chips" not in p or (*_rack_key(p), p["replica_chips"]) not in dropped]
    return kept, screened


def _answer(p: dict, store: PointStore, evaluate: Callable[[dict], dict]) -> dict:
    """The stored row of point `p`, or the engine's answer to it (then stored)."""
    if store.has(p):
        return store.load(p)["row"]
    from lpxsim.bench.sweep import point_row

    row = point_row(evaluate, p)
    store.save(p, row)
    return row
