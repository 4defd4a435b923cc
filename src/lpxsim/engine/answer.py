"""The operating-point engine: one question (model, deployment, workload, load), one answer.

`answer` places the deployment (`engine.deployment.place`: given exactly, or the default one), prices the
workload on one replica with the closed-loop steady state (`engine.steady_state`, deterministic stagger:
what the serving simulator converges to; `docs/engine.md`), splits the load over the deployment's
replicas, and says when the load is more than the deployment holds -- never moving to a bigger one.

Statistics (the same in every command; AIPerf's definitions, `serving.metrics`):
- TTFT: arrival to first token, queueing included (mean over requests).
- TPOT: (E2E - TTFT) / (OSL - 1), the mean time between a request's output tokens after the first;
  AIPerf's `inter_token_latency` of a request is this same quantity.
- tok/s/user: the mean over requests of AIPerf's per-user output throughput, 1 / TPOT -- the streaming
  speed after the first token. In the steady state every request of a load is alike, so mean = P50.
- aggregate (`tok_s_total`): output tokens per second of the whole deployment.
- tok/s/MW: the aggregate over the deployment's power (every powered chip, idle ones included).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from lpxsim.core.errors import UserError
from lpxsim.core.frameworks import LATEST
from lpxsim.engine.bands import path_for
from lpxsim.engine.concurrency import GPU_ARRIVALS, BeyondHeld, arrivals_for, replica_ceiling, sessions_fit
from lpxsim.engine.deployment import Placed, Precision, place, units_for_streams
from lpxsim.engine.query import Deployment, Load, Objective, Workload
from lpxsim.engine.steady_state import Estimate, prefill_cost, steady_state

STATISTIC = ("tok/s/user: mean over requests of 1/TPOT (AIPerf output throughput per user; "
             "TPOT = AIPerf inter-token latency); TTFT: mean, queueing included")
# The engine's queueing. "auto": the steady state with the deterministic stagger, unless the arrival pattern
# decides the answer (the stagger and the random-arrival wait differ by more than SENSITIVE), where the serving
# simulator answers on the same replica (`engine.simulated`; docs/engine.md, "One queueing answer").
ARRIVALS = "auto"
SENSITIVE_TOK_S_USER = 0.02  # relative difference in tok/s/user between the two arrival patterns
SENSITIVE_TTFT = 0.05  # relative difference in TTFT
# Where other users' prefills take more than this share of a request's cycle, where they fall (wait, decode or
# a request's own first-token drain, which both steady states credit alike) decides the split between TTFT and
# TPOT, and the aggregate by up to that share, however the two patterns above compare: the simulator answers.
# 3 %: the engine's agreement with the simulator on the aggregate (tests/test_engine_queueing.py), so a share
# that could move the aggregate further is never left to the mean field (at 5 %, Gemma 4 31B at 10K on Vera
# Rubin with two streams a replica, a 4.9 % share, came out 4.4 % above the simulator).
SENSITIVE_PREFILL_SHARE = 0.03
# A GPU deployment is answered with the random-arrival wait (`concurrency.GPU_ARRIVALS`), the queueing under
# which its engine parameters were fitted (`gpu.calibration`) and against which `lpxsim validate` measures the
# band it prints: the validated path. The simulator of identical requests bunches them into waves, and on the
# calibration rows where the pattern decides its TTFT misses the measurement by about 57 % (median) where this
# steady state misses by 14 % (docs/engine.md, "One queueing answer"; `lpxsim validate`, "Queueing").
GPU_SOLVER = "steady state (random arrivals, as the GPU replay)"


@dataclass(frozen=True)
class Answer:
    """What one deployment does for one workload at one load. Every figure travels with its label."""

    model: str
    deployment: Deployment
    workload: Workload
    load: Load
    ttft_s: float
    tpot_s: float
    e2e_s: float
    tok_s_user: float
    tok_s_total: float  # output tok/s of the whole deployment
    total_tok_s: float  # input + output tok/s of the whole deployment (InferenceX counts both)
    power_w: float
    tok_s_per_mw: float
    streams_admitted: int  # streams running at once (the rest wait for a slot)
    kv_ceiling: int  # streams of isl + osl tokens the deployment holds (all replicas)
    ttft_wait_s: float = 0.0  # queueing included in ttft_s (admission holds, waiting for a slot)
    micro_batches: int = 1
    decode_period_s: float = 0.0
    spec_k: int = 0
    spec_accept: float = 0.0
    tokens_per_round: float = 1.0
    needs: str = ""  # e.g. "needs 2 racks" when the load is more than the deployment holds
    alternative: Deployment | None = None  # the bigger deployment that would hold the load (never used silently)
    statistic: str = STATISTIC
    solver: str = "steady state (stagger)"
    notes: tuple[str, ...] = field(default_factory=tuple)
    cost_path: str = ""  # which validated path priced it (`engine.bands`): its error band travels with it
    # Sessions (a session workload's users hold KV through their think time): streams in a turn (mean over the
    # deployment; = streams_admitted without think time), the KV the held sessions or streams keep resident, the
    # deployment's KV capacity, and a session's first turn (its whole input prefilled, no queue).
    streams_decoding: float = 0.0
    kv_resident_bytes: float = 0.0
    kv_capacity_bytes: float = 0.0
    ttft_first_turn_s: float = math.nan

    @property
    def over_capacity(self) -> bool:
        return self.load.concurrency is not None and self.streams_admitted < self.load.concurrency

    @property
    def chips(self) -> int:
        return self.deployment.powered_chips

    def label(self) -> str:
        """'ISL 10,000 / OSL 256, no prefix reuse, concurrency 40 on 1 lpx rack (256 chips, ...), 97.0 kW'."""
        return f"{self.workload.label()}, {self.load.label()} on {self.deployment.label()}"

    def as_dict(self) -> dict:
        """Plain JSON values: the figures, the question's parts and the labels."""
        d = self.deployment
        return {
            "model": self.model, "system": d.system, "chips": d.powered_chips, "replica_chips": d.chips,
            "replicas": d.replicas, "layout": d.layout, "deployment_given": d.given, "deployment": d.label(),
            "power_w": self.power_w, "isl": self.workload.isl, "osl": self.workload.osl,
            "context": self.workload.context, "session": self.workload.session.label() if self.workload.session
            else "no prefix reuse", "workload": self.workload.label(), "concurrency": self.load.concurrency,
            "ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s, "tok_s_user": self.tok_s_user,
            "tok_s_total": self.tok_s_total, "total_tok_s": self.total_tok_s,
            "output_tok_s_per_chip": self.tok_s_total / max(1, d.powered_chips),
            "total_tok_s_per_chip": self.total_tok_s / max(1, d.powered_chips), "tok_s_per_mw": self.tok_s_per_mw,
            "ttft_wait_s": self.ttft_wait_s, "micro_batches": self.micro_batches, "spec_k": self.spec_k,
            "spec_accept": self.spec_accept, "tokens_per_round": self.tokens_per_round,
            "streams_admitted": self.streams_admitted, "kv_ceiling": self.kv_ceiling,
            "over_capacity": self.over_capacity, "needs": self.needs,
            "alternative": self.alternative.label() if self.alternative else "",
            "session_kind": "none" if self.workload.session is None else "agentic",
            "new_tokens": self.workload.prefilled, "think_s": self.workload.think_s,
            "sessions_held": self.streams_admitted if self.workload.session else 0,
            "sessions_waiting": max(0, (self.load.concurrency or 0) - self.streams_admitted)
            if self.workload.session else 0, "streams_decoding": self.streams_decoding,
            "kv_resident_bytes": self.kv_resident_bytes, "kv_capacity_bytes": self.kv_capacity_bytes,
            "ttft_first_turn_s": self.ttft_first_turn_s, "notes": list(self.notes),
            "statistic": self.statistic, "solver": self.solver, "label": self.label(),
            **self.bands(),
        }

    def bands(self) -> dict:
        """The error bands of this answer's cost path (`engine.bands.figure_bands`): per metric the +- fraction,
        the interval it puts around the figure (tok_s_per_chip: around output tok/s per chip), and the validation
        it comes from; {} where the answer has no path."""
        from lpxsim.engine.bands import figure_bands

        if not self.cost_path:
            return {}
        d = self.deployment
        return figure_bands(d.system, self.cost_path, d.layout, {
            "tok_s_user": self.tok_s_user, "ttft": self.ttft_s,
            "tok_s_per_chip": self.tok_s_total / max(1, d.powered_chips)}, spec=self.spec_k > 0)


def kv_ceiling(step, context: int) -> int:
    """Streams of `context` tokens whose KV fits one replica, capped by its largest batch."""
    return replica_ceiling(step, context)


def ceiling_for(step, workload: Workload) -> int:
    """The users one replica holds for `workload`: streams of its context in the no-cache loop (`kv_ceiling`);
    sessions of it under the simulator's default retention (`engine.concurrency.sessions_fit`: `hold` keeps
    headroom free), capped by the largest batch only without think time (sessions in think time hold KV but
    take no batch slot; the streams in a turn stay within the batch: `_held`)."""
    if workload.session is None:
        return kv_ceiling(step, workload.context)
    held = sessions_fit(step, workload.context)
    return held if workload.think_per_turn_s > 0 else min(held, step.max_batch())


def answer(model, deployment: Deployment | None, workload: Workload, load: Load,
           objective: Objective = Objective.LATENCY, *, system: str | None = None,
           precision: Precision = Precision(), framework: str = "sglang", spec_k: int = 0,
           spec_accept: float = 0.0, arrivals: str = ARRIVALS, release: str = LATEST) -> Answer:
    """The operating point of `model` on `deployment` (None: the default deployment of `system`, the fewest
    whole units that hold the workload) for `workload` at `load`.

    The deployment is kept exactly: a load beyond its KV ceiling runs the ceiling's streams and the rest
    wait for a slot (in TTFT), and the answer names the bigger deployment that would hold it (`needs`,
    `alternative`). `objective` picks the GPU layout search's goal when the layout is not given (LPX
    layouts are searched for the deployment's workload); ranking deployments is `engine.search`. `release`: the
    GPU engine release the steps price (the latest; a replay of a dated run its own: `gpu.engine.engine_params`)."""
    if load.concurrency is None:
        raise UserError("rate", "the steady state answers closed-loop loads; simulate an open arrival rate "
                                "with `lpxsim simulate`")
    if deployment is None and system is None:
        raise UserError("system", "give a system or a deployment")
    goal = "latency" if objective == Objective.LATENCY else "throughput"
    placed = place(model, system or deployment.system, workload, deployment, precision, framework, goal, release)
    return answer_on(placed, workload, load, spec_k=spec_k, spec_accept=spec_accept, arrivals=arrivals,
                     precision=precision)


def answer_on(placed: Placed, workload: Workload, load: Load, *, spec_k: int = 0, spec_accept: float = 0.0,
              arrivals: str = ARRIVALS, precision: Precision = Precision(), advise: bool = True) -> Answer:
    """`answer` on a deployment already placed (a search prices many loads on one).

    `advise`: over capacity, name the bigger deployment that holds the load (`needs`: up to NEEDS_TRIES layout
    searches, on LPX compiles); False for a caller that shows no advice (the sweep marks such a row over its
    ceiling), so it pays for none.

    A session workload's users are sessions: each holds its KV (`workload.context` tokens) through its think
    time, so the sessions held and the streams decoding are two numbers (`_held`). Sessions beyond the KV
    ceiling are not held: as the simulator's default retention without an offload tier (`hold`), they wait
    for a held session to end, and the wait is in TTFT (docs/engine.md, "Sessions")."""
    dep, step = placed.deployment, placed.step
    users = int(load.concurrency)
    priced = prefix_cached(step, workload)
    ceiling = ceiling_for(step, workload) * dep.replicas
    if ceiling < 1:
        raise UserError("concurrency", f"one {workload.context:,}-token stream does not fit {dep.label()}")
    admitted = min(users, ceiling)  # streams (no-cache loop) or sessions (a session workload) with KV resident

    solvers: set[str] = set()

    def at(c: int) -> Estimate:
        return _held(lambda n: _one(placed, priced, workload, n, spec_k, spec_accept, solvers, arrivals),
                     workload, c)

    # The admitted streams spread over the replicas as evenly as they go: r replicas run q + 1, the rest q.
    q, r = divmod(admitted, dep.replicas)
    groups = [(n, c) for n, c in ((r, q + 1), (dep.replicas - r, q)) if n > 0 and c > 0]
    ests = [(n, at(c)) for n, c in groups]
    rate = sum(n * e.tok_s_total for n, e in ests) / workload.osl  # completed requests (turns) per second
    weight = [(n * e.tok_s_total / workload.osl) / rate for n, e in ests]  # share of requests

    def mean(attr: str) -> float:
        return sum(w * getattr(e, attr) for w, (_, e) in zip(weight, ests, strict=True))

    ttft, tpot, e2e = mean("ttft_s"), mean("tpot_s"), mean("e2e_s")
    wait = mean("ttft_wait_s")
    tok_total = sum(n * e.tok_s_total for n, e in ests)
    total = sum(n * e.total_tok_s for n, e in ests)
    needs, alt = "", None
    notes = [n for n in (placed.model.window_note(workload.context),) if n]  # ISL + OSL: priced as asked
    if users > admitted:
        # Closed loop: every slot is busy and the users beyond them queue for the next free one; each user's
        # cycle (a request, and a session's think time) stretches to users / rate, spent waiting before its prefill.
        slot_wait = max(0.0, users / rate - e2e - workload.think_per_turn_s)
        ttft, e2e, wait = ttft + slot_wait, e2e + slot_wait, wait + slot_wait
        if advise:
            needs, alt = _needs(placed, workload, users, precision)
        if workload.session is not None:
            from lpxsim.serving.config import RetentionConfig

            notes.append(
                f"KV over capacity: {users:,} sessions of {workload.context:,} tokens need "
                f"{users * step.kv_bytes(workload.context) / 1e9:,.1f} GB of KV resident; the deployment holds "
                f"{step.kv_capacity_bytes() * dep.replicas / 1e9:,.1f} GB, {ceiling:,} sessions. The other {users - admitted:,} are "
                f"not held: they wait for a held session to end (retention 'hold', the simulator's default without "
                f"an offload tier, which also keeps {RetentionConfig().headroom:.0%} of the KV free for the held "
                f"sessions' growth), {slot_wait:,.2f} s a turn on average, in TTFT (it falls on their first turns)")
    tok_user = mean("tok_s_user")
    power = dep.power_w
    first = ests[0][1]
    first_turn = prefill_cost(step, workload.isl)[0]  # a session's first turn prefills everything, no queue
    return Answer(
        model=placed.model.name, deployment=dep, workload=workload, load=load, ttft_s=ttft, tpot_s=tpot,
        e2e_s=e2e, tok_s_user=tok_user, tok_s_total=tok_total, total_tok_s=total, power_w=power,
        tok_s_per_mw=tok_total / (power / 1e6) if power > 0 else math.nan, streams_admitted=admitted,
        kv_ceiling=ceiling, ttft_wait_s=wait, micro_batches=first.micro_batches,
        decode_period_s=first.decode_period_s, spec_k=spec_k, spec_accept=spec_accept,
        tokens_per_round=first.tokens_per_round, needs=needs, alternative=alt,
        solver=" + ".join(sorted(solvers)), cost_path=path_for(dep.system, precision.weights, dep.framework or "sglang"),
        notes=tuple(notes), streams_decoding=sum(n * streams_decoding(e, workload) for n, e in ests),
        kv_resident_bytes=admitted * step.kv_bytes(workload.context),
        kv_capacity_bytes=step.kv_capacity_bytes() * dep.replicas, ttft_first_turn_s=first_turn,
    )


def _one(placed: Placed, priced, workload: Workload, c: int, spec_k: int, spec_accept: float, solvers: set[str],
         arrivals: str) -> Estimate:
    """One replica with `c` requests in flight, as the engine's queueing answers it."""
    if arrivals != "auto":
        solvers.add(f"steady state ({arrivals})")
        return steady_state(priced, workload.isl, workload.osl, c, spec_k=spec_k, spec_accept=spec_accept,
                            arrivals=arrivals)
    return _auto(placed, priced, workload, c, spec_k, spec_accept, solvers)


def _held(evaluate, workload: Workload, held: int) -> Estimate:
    """One replica holding `held` sessions (or streams): the estimate at the requests in flight, with the
    aggregate over the whole cycle.

    Without think time every held stream is in flight. With it, a session spends think time in each cycle
    holding its KV but not decoding, think = `workload.think_per_turn_s` a turn on average (no tool call after
    a session's last turn: the next session takes the slot then): of `held` sessions, n = held x E2E(n) /
    (E2E(n) + think) are in a turn (Little's law on the cycle; E2E grows with n, so the integer n nearest the
    fixed point is found by bisection). The per-user figures are those at n in flight; the turns completed per
    second are held / (E2E + think). The estimate's `concurrency` is `held` (`streams_decoding` gives the mean
    in flight)."""
    think = workload.think_per_turn_s
    if think <= 0:
        return evaluate(held)
    memo: dict[int, Estimate] = {}

    def gap(n: int) -> float:  # in flight minus what the cycle puts in flight; increasing in n
        if n not in memo:
            memo[n] = evaluate(n)
        e = memo[n]
        return n - held * e.e2e_s / (e.e2e_s + think)

    lo, hi = 1, held  # gap(held) > 0 always; find the smallest n with gap(n) >= 0
    if gap(lo) < 0:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if gap(mid) >= 0:
                hi = mid
            else:
                lo = mid
        n = hi if abs(gap(hi)) <= abs(gap(lo)) else lo
    else:
        n = lo
    e = memo[n]
    rate = held / (e.e2e_s + think)  # turns completed per second by this replica
    out_tps, total_tps = rate * workload.osl, rate * workload.context
    chips = max(1, e.chips)
    return replace(e, concurrency=held, tok_s_total=out_tps, total_tok_s=total_tps, output_tok_s_per_chip=out_tps / chips,
                   total_tok_s_per_chip=total_tps / chips,
                   tok_s_per_mw=out_tps / (e.power_w / 1e6) if e.power_w > 0 else math.nan)


def arrival_sensitive(step, isl: int, c: int, stagger: Estimate, random: Estimate) -> bool:
    """Whether the arrival pattern decides the answer at `c` streams: the stagger and random-arrival steady states
    differ by more than SENSITIVE_TOK_S_USER or SENSITIVE_TTFT, or the other users' prefills take more than
    SENSITIVE_PREFILL_SHARE of a request's cycle."""
    _, occupancy = prefill_cost(step, isl)
    others = (c - 1) * occupancy / stagger.e2e_s  # the share of a cycle other users' prefills take
    return not (others <= SENSITIVE_PREFILL_SHARE
                and abs(random.tok_s_user / stagger.tok_s_user - 1.0) <= SENSITIVE_TOK_S_USER
                and abs(random.ttft_s / stagger.ttft_s - 1.0) <= SENSITIVE_TTFT)


def _auto(placed: Placed, priced, workload: Workload, c: int, spec_k: int, spec_accept: float,
          solvers: set[str]) -> Estimate:
    """One replica at `c` streams. A GPU: the random-arrival steady state, the queueing its engine parameters were
    fitted and validated under (`GPU_ARRIVALS`). Otherwise the stagger steady state, or the simulator where the
    arrival pattern decides (speculative decoding and prefix-cached sessions stay with the steady state: the
    synthetic closed loop the simulator runs here has neither)."""
    def ss(arr: str) -> Estimate:
        return steady_state(priced, workload.isl, workload.osl, c, spec_k=spec_k, spec_accept=spec_accept,
                            arrivals=arr)

    if arrivals_for(placed.deployment.system) == GPU_ARRIVALS:
        solvers.add(GPU_SOLVER)
        return ss(GPU_ARRIVALS)
    stagger = ss("stagger")
    if c == 1 or spec_k > 0 or workload.session is not None:
        solvers.add("steady state (stagger)")
        return stagger
    if not arrival_sensitive(priced, workload.isl, c, stagger, ss("random")):
        solvers.add("steady state (stagger)")
        return stagger
    from lpxsim.engine.simulated import simulate_answer

    one = replace(placed, deployment=replace(placed.deployment, replicas=1, idle_chips=0))
    sim = simulate_answer(one, workload, Load(concurrency=c))
    solvers.add("serving simulator (arrival-sensitive)")
    own = stagger.ttft_s - stagger.ttft_wait_s
    return replace(stagger, ttft_s=sim.ttft_s, tpot_s=sim.tpot_s, e2e_s=sim.e2e_s, tok_s_user=sim.tok_s_user,
                   tok_s_total=sim.tok_s_total, total_tok_s=sim.tok_s_total * workload.context / workload.osl,
                   output_tok_s_per_chip=sim.tok_s_total / max(1, stagger.chips),
                   total_tok_s_per_chip=sim.tok_s_total * workload.context / workload.osl / max(1, stagger.chips),
                   tok_s_per_mw=sim.tok_s_total / (stagger.power_w / 1e6) if stagger.power_w > 0 else math.nan,
                   ttft_wait_s=max(0.0, sim.ttft_s - own))


def streams_decoding(e: Estimate, workload: Workload) -> float:
    """Mean streams in a turn of a replica's `e.concurrency` held sessions: each is in a turn E2E of every
    E2E + think a turn (`Workload.think_per_turn_s`; Little's law); without think time, every held stream."""
    return e.concurrency * e.e2e_s / (e.e2e_s + workload.think_per_turn_s)


def replica_estimate(placed: Placed, workload: Workload, c: int, spec_k: int = 0,
                     spec_accept: float = 0.0) -> Estimate:
    """One replica of `placed` at `c` streams (a session workload: `c` sessions held) as the engine answers it
    (the search prices its candidates so). More sessions than the replica holds (`ceiling_for`) is a
    `UserError`: the rest would wait, which `answer_on` reports and a search must not pick."""
    if workload.session is not None and c > (held := ceiling_for(placed.step, workload)):
        raise BeyondHeld(held, f"one replica holds {held:,} sessions of {workload.context:,} tokens under the "
                               f"default retention, not {c:,}")
    priced = prefix_cached(placed.step, workload)
    return _held(lambda n: _auto(placed, priced, workload, n, spec_k, spec_accept, set()), workload, c)


def prefix_cached(step, workload: Workload):
    """The step model a workload's requests see: with a session, later turns prefill only their new tokens."""
    if workload.session is None:
        return step
    from lpxsim.engine.prefix import PrefixCachedStep

    return PrefixCachedStep(step, workload.isl, min(workload.isl, workload.session.new_tokens))


# How many unit counts `_needs` tries before it gives up naming a deployment (each is a layout search, on LPX a
# compile): the pooled-memory count starts it, and each miss scales the units by the users over what they held.
NEEDS_TRIES = 6


def _needs(placed: Placed, workload: Workload, users: int, precision: Precision) -> tuple[str, Deployment | None]:
    """The fewest whole units that hold `users` as the engine places them ("needs 2 racks"), and that deployment.

    At each unit count two deployments are asked, each with its ceiling as the engine counts it (`ceiling_for`,
    every replica), so following the advice never leaves the load over capacity: copies of this deployment's own
    replica (their ceiling is known: no layout search; the flags that lay them out are named, since a search may lay
    N units out otherwise), then the one `estimate --racks N` (`--gpus N`) lays out. The pooled memory count
    (`units_for_streams`: on LPX no fewer units hold them; on a GPU within its runtime reserve of that) starts the
    search; a count that holds too few is followed by one scaled by the users over what it held."""
    from lpxsim.catalog import get_system
    from lpxsim.core.errors import DoesNotFit

    dep = placed.deployment
    s = get_system(dep.system)
    what = "sessions" if workload.session is not None else "streams"
    lower = units_for_streams(placed.model, s.name, workload.context, users, precision)
    if lower is None:
        return (f"{users:,} {what} of {workload.context:,} tokens need more than {s.max_units} {s.unit_name}s "
                f"of {s.name}"), None
    per_replica = ceiling_for(placed.step, workload)
    flags = _layout_flags(dep)
    units, best = max(lower, math.floor(dep.powered_chips / s.chips_per_unit) + 1), (0, 0)
    for _ in range(NEEDS_TRIES):
        if units > s.max_units:
            break
        chips = units * s.chips_per_unit
        name = f"needs {units} {s.unit_name}{'s' if units != 1 else ''}"
        copies = chips // dep.chips if flags is not None else 0  # copies of this replica: their ceiling is known
        if copies * per_replica >= users:
            tiled = replace(dep, replicas=copies, idle_chips=chips - copies * dep.chips, given=False)
            return (f"{name} as {copies} copies of this replica (holding {copies * per_replica:,}; "
                    f"{flags(chips)})"), tiled
        try:
            alt = place(placed.model, s.name, workload, Deployment(s.name, chips, given=True), precision,
                        placed.framework, placed.goal)
            held = ceiling_for(alt.step, workload) * alt.deployment.replicas
        except (DoesNotFit, UserError):  # no layout of these units holds even one: more units may
            alt, held = None, 0
        if alt is not None and held >= users:
            return f"{name} (holding {held:,})", replace(alt.deployment, given=False)
        held = max(held, copies * per_replica)
        best = max(best, (held, units))
        units = max(units + 1, math.ceil(units * users / max(held, 1)))
    if best[0] == 0:
        return f"{users:,} {what} of {workload.context:,} tokens do not fit the largest {s.name} deployment", None
    return (f"{users:,} {what} of {workload.context:,} tokens do not fit any {s.name} deployment tried (the most "
            f"held: {best[0]:,}, on {best[1]} {s.unit_name}s)"), None


def _layout_flags(dep: Deployment):
    """The flags that lay a number of chips out as copies of `dep`'s replica (LPX `--chips N --layout L`, GPU
    `--gpus N --tp ...`), as a function of the chips; None where its layout is not one a user can state."""
    from lpxsim.catalog import get_system
    from lpxsim.engine.deployment import gpu_layout_of

    if get_system(dep.system).is_lpu:
        from lpxsim.lpu.layout import parse_layout

        try:
            parse_layout(dep.layout)
        except UserError:
            return None
        return lambda chips: f"--chips {chips} --layout {dep.layout}"
    try:
        lay = gpu_layout_of(dep.layout)
    except ValueError:
        return None
    fixed = f"--tp {lay['tp']} --ep {lay['ep']}" + (f" --pp {lay['pp']}" if lay["pp"] > 1 else "") + (
        " --dp-attention" if lay["dp_attention"] else "") + (" --kv-parallel" if lay["kv_parallel"] else "")
    return lambda chips: f"--gpus {chips} {fixed}"


def with_deployment(a: Answer, dep: Deployment) -> Answer:
    return replace(a, deployment=dep)
