"""The fleet plan's values: request classes, candidate systems, pool types and the solved plan.

A pool type is one way one replica serves one class (`lpxsim.plan.fleet`): its capacity at the class's
targets and the racks of each system it occupies. `rack_share` says how many racks a replica takes when
replicas keep to whole racks (the default) or may straddle two (`allow_straddle`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from lpxsim.plan.operating_point import OperatingPoint


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
    # An agentic session (`engine.query.SessionShape`: its new tokens and think time; the engine's default shape
    # unless the demand file says otherwise) or None: the no-cache loop (or, with `new_tokens` alone, a cached
    # prefix without think time)
    session: object | None = None

    @property
    def workload_label(self) -> str:
        """The class's workload as every engine answer labels it (session shape, or no prefix reuse)."""
        from lpxsim.engine.query import Workload

        if self.session is None and self.new_tokens is not None and self.new_tokens < self.isl:
            return (f"ISL {self.isl:,} / OSL {self.osl:,}, {self.new_tokens:,} new tokens a request "
                    f"({self.isl - self.new_tokens:,} cached), no think time")
        return Workload(self.isl, self.osl, self.session).label()

    def streams_decoding(self, sessions_held: int, turns_per_s: float) -> float:
        """Of `sessions_held` on one replica completing `turns_per_s` turns, the mean in a turn: the others are in
        think time, turns_per_s x think a turn of them (Little's law); every one without a session."""
        think = 0.0 if self.session is None else self.session.think_per_turn_s
        return max(0.0, sessions_held - turns_per_s * think)

    @property
    def demand(self) -> float:
        return float(self.requests_per_s if self.requests_per_s is not None else self.concurrent_sessions or 0.0)

    @property
    def demand_unit(self) -> str:
        if self.requests_per_s is not None:
            return "req/s"
        return "sessions" if self.session is not None else "users"  # the no-cache loop's users hold no session


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
    workload: str = ""  # the class's workload label (`RequestClass.workload_label`)
    # of concurrency_per_replica (sessions held, for a session class), those in a turn: the rest think (Little's
    # law: turns per second x think time a turn), as `estimate`'s `streams_decoding`
    streams_decoding_per_replica: float = 0.0


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
    allow_straddle: bool = False  # replicas may span two racks (else each keeps to whole racks)
    closest: dict | None = None  # infeasible: the closest feasible target or fleet (`lpxsim.plan.fleet`)

    def straddle_note(self) -> str:
        """One line: whether replicas may span racks, and what keeping to whole racks costs here."""
        if self.allow_straddle:
            return "replicas may straddle racks (allow_straddle): a replica's chips may span two racks"
        idle = [f"{a.request_class} on {a.system}: {a.replicas:,} replica(s) of {a.chips // max(1, a.replicas):,} "
                f"chips in {a.units:g} rack(s)" for a in self.assignments if a.units > 0]
        return "replicas keep to whole racks (no straddling; --allow-straddle to allow it)" + (
            "; " + "; ".join(idle) if idle else "")

    def as_dict(self) -> dict:
        return {
            "feasible": self.feasible, "objective": self.objective, "allow_straddle": self.allow_straddle,
            "straddle": self.straddle_note(), "closest": self.closest,
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



def rack_share(units: float, allow_straddle: bool = False) -> float:
    """Racks one replica of `units` racks (a fraction, as its chips over a rack's) takes in the fleet.

    Replicas keep to whole racks unless `allow_straddle`: a replica larger than a rack takes the whole racks
    around it (1.88 racks take 2), a smaller one 1/k of a rack where k of them fit one rack (160 of 256 chips:
    one per rack, 96 chips idle). With `allow_straddle` a replica may span two racks and takes exactly `units`."""
    if allow_straddle or units <= 0:
        return units
    if units > 1.0 + 1e-9:
        return float(math.ceil(units - 1e-9))
    return 1.0 / math.floor(1.0 / units + 1e-9)
