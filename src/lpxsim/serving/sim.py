"""The simulation: builds the fleet's workers, drives arrivals through the router, collects results.

Topologies follow from the pool roles (`config.py`): aggregated pools serve
alone; prefill -> decode pools are joined by a KV transfer over their link;
attention + ffn pools become AFD composites (`afd.py`); target + drafter pools
become speculative workers (`spec.py`). Request classes map to entry pools.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from lpxsim.lpu.gcpause import gc_paused
from lpxsim.serving.afd import AfdStepModel
from lpxsim.serving.backends import make_step_model, pool_model
from lpxsim.serving.config import ENTRY_ROLES, FleetConfig, PoolConfig
from lpxsim.serving.engine import Engine, EventKind
from lpxsim.serving.kvcache import ResidentCount, TierStore
from lpxsim.serving.occupancy import OccupancyTimeline
from lpxsim.serving.request import DONE, REJECTED, Request
from lpxsim.serving.router import Router
from lpxsim.serving.spec import Link, SpecWorker
from lpxsim.serving.worker import SharedResource, Worker
from lpxsim.serving.workload import Workload, WorkloadConfig, make_workload


class PoolRuntime:
    """A pool's workers plus what the metrics need to know about it."""

    def __init__(self, cfg: PoolConfig, workers: list[Worker], power_w: float, chips: int, step_name: str,
                 shares: list[SharedResource] | None = None) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.role = cfg.role
        self.workers = workers
        self.power_w = power_w  # all replicas of this pool
        self.chips = chips
        self.step_name = step_name
        self.shares = shares or []  # FFN / drafter replicas time-shared by another pool's workers


class Simulation:
    """One run: a fleet, a workload, a seed."""

    def __init__(self, fleet: FleetConfig, workload: WorkloadConfig, seed: int = 0,
                 duration_s: float | None = None, horizon_s: float | None = None) -> None:
        self.fleet = fleet
        self.wcfg = workload
        self.engine = Engine(seed)
        self.rng = self.engine.rng
        r = fleet.router
        self.router = Router(r.policy, r.overlap_weight, r.temperature, fleet.scheduler.block_tokens, self.rng)
        self.pools: dict[str, PoolRuntime] = {}
        self.model_tables: dict[tuple, dict] = {}  # per (step model, block): tables its workers share
        self.links: dict[str, Link] = {}
        self.requests: list[Request] = []
        self.in_system = 0
        self.n_integral = 0.0
        self.n_last_t = 0.0
        self.completed = 0
        self.workload: Workload = make_workload(workload, self.rng, duration_s)
        self.horizon_s = horizon_s
        self._resident: dict[str, ResidentCount] = {}
        self._homes: dict[tuple[int, int], Worker] = {}  # (entry 0 / decode 1, session) -> where its KV is
        self._build()
        self.context_window = self._context_window()
        self.workload.context_window = self.context_window  # sessions truncate to it (docs/serving.md)
        self.occupancy = OccupancyTimeline(self)
        self._entry = [p for p in self.pools.values() if p.role in ENTRY_ROLES]
        self._class_workers: dict[str, list[Worker]] = {}
        self._all_entry_workers = [w for p in self._entry for w in p.workers]
        self._decode_pool = next((p for p in self.pools.values() if p.role == "decode"), None)
        self._prefill_link: Link | None = None
        if self._decode_pool is not None:
            pre = next(p for p in self.pools.values() if p.role == "prefill")
            self._prefill_link = self._link(pre.name, self._decode_pool.name)
        self._arrivals: Iterator[Request] | None = None

    # --- fleet construction ------------------------------------------------------------------
    def _link(self, a: str, b: str) -> Link:
        cfg = self.fleet.link_between(a, b)
        key = "|".join(sorted((a, b)))
        if key not in self.links:
            self.links[key] = Link(f"{a}<->{b} ({cfg.kind})", cfg.bandwidth_Bps, cfg.latency_s)
        return self.links[key]

    def make_tier(self, pool: str, index: int) -> TierStore | None:
        """The offload tier of replica `index` of `pool` (None if the pool has none), with its own link."""
        cfg = next(p for p in self.fleet.pools if p.name == pool).offload
        if cfg is None:
            return None
        out = Link(f"{pool}[{index}]->{cfg.name} (offload)", cfg.bandwidth_Bps, cfg.latency_s)
        back = Link(f"{cfg.name}->{pool}[{index}] (reload)", cfg.bandwidth_Bps, cfg.latency_s)
        self.links[out.name], self.links[back.name] = out, back
        return TierStore(cfg.name, cfg.capacity_bytes, out, back, self._now)

    def _now(self) -> float:
        return self.engine.now

    def resident_count(self, pool: str) -> ResidentCount:
        """The count of sessions with KV resident in `pool` (shared by its workers' stores)."""
        return self._resident.setdefault(pool, ResidentCount())

    def _context_window(self) -> int | None:
        """The smallest context window of the models that serve requests (None: no pool states one)."""
        wins = [pool_model(p).max_context for p in self.fleet.pools if p.role not in ("ffn", "drafter")]
        wins = [w for w in wins if w]
        return min(wins) if wins else None

    def _build(self) -> None:
        fleet = self.fleet
        by_role = {p.role: p for p in fleet.pools}
        for i, p in enumerate(fleet.pools):
            field = f"fleet.pools.{i}"
            if p.role in ("ffn", "drafter"):
                continue  # built with their partner
            if p.role == "attention":
                self._build_afd(p, by_role["ffn"], field)
                continue
            if p.role == "target":
                self._build_spec(p, by_role["drafter"], field)
                continue
            step = make_step_model(p, field=field)
            # one StepModel per pool: a cost function, shared by the pool's replicas
            if p.mtp and p.role != "prefill":
                workers = self._mtp_workers(p, step, field)
            else:
                workers = [Worker(self, p.name, j, step, self._sched(p), p.role) for j in range(p.workers)]
            self.pools[p.name] = PoolRuntime(p, workers, step.power_w * p.workers, step.chips * p.workers, step.name)

    def _mtp_workers(self, p: PoolConfig, step, field: str) -> list[Worker]:
        """Workers drafting with the model's own MTP head (see serving/mtp.py)."""
        from lpxsim.core.errors import UserError
        from lpxsim.serving.mtp import MtpWorker
        from lpxsim.specs.mtp import default_accept

        accept = p.mtp_accept
        if accept is None:
            try:
                accept = default_accept(pool_model(p))
            except UserError as e:
                raise UserError(f"{field}.mtp_accept", e.message) from None
        return [MtpWorker(self, p.name, j, step, self._sched(p), p.role, p.mtp, accept) for j in range(p.workers)]

    def _sched(self, p: PoolConfig):
        """The fleet's scheduler, with the pool's own max_batch where it sets a lower one."""
        s = self.fleet.scheduler
        if p.max_batch is None or p.max_batch >= s.max_batch:
            return s
        return s.model_copy(update={"max_batch": p.max_batch})

    def _build_afd(self, att: PoolConfig, ffn: PoolConfig, field: str) -> None:
        link_cfg = self.fleet.link_between(att.name, ffn.name)
        per = -(-att.workers // ffn.workers)
        shares = [SharedResource(f"{ffn.name}[{j}]") for j in range(ffn.workers)]
        workers = []
        a = make_step_model(att, part="attention", field=field)
        f = make_step_model(ffn, part="ffn", field=field)
        for j in range(att.workers):
            # one link per attention replica to its FFN replica; the FFN side's share models contention
            link = Link(f"{att.name}[{j}]<->{ffn.name} ({link_cfg.kind})", link_cfg.bandwidth_Bps, link_cfg.latency_s)
            self.links[link.name] = link
            share = shares[j % ffn.workers]
            step = AfdStepModel(a, f, link, share, per, self.fleet.afd.micro_batches)
            workers.append(Worker(self, att.name, j, step, self._sched(att), "aggregated", share=share))
        a0 = workers[0].model.attention
        f0 = workers[0].model.ffn
        self.pools[att.name] = PoolRuntime(att, workers, a0.power_w * att.workers, a0.chips * att.workers, a0.name)
        self.pools[ffn.name] = PoolRuntime(ffn, [], f0.power_w * ffn.workers, f0.chips * ffn.workers, f0.name, shares)

    def _build_spec(self, tgt: PoolConfig, dr: PoolConfig, field: str) -> None:
        link_cfg = self.fleet.link_between(tgt.name, dr.name)
        shares = [SharedResource(f"{dr.name}[{j}]") for j in range(dr.workers)]
        hidden = 2.0 * pool_model(tgt).hidden_size
        workers = []
        t = make_step_model(tgt, field=field)
        d = make_step_model(dr, field=field)
        for j in range(tgt.workers):
            link = Link(f"{tgt.name}[{j}]<->{dr.name} ({link_cfg.kind})", link_cfg.bandwidth_Bps, link_cfg.latency_s)
            self.links[link.name] = link
            workers.append(SpecWorker(self, tgt.name, j, t, self._sched(tgt), d, shares[j % dr.workers], link,
                                      self.fleet.speculation, hidden))
        per = -(-tgt.workers // dr.workers)
        for w in workers:  # the drafter's own KV of the sessions a target holds (docs/serving.md "Sessions")
            w.limit_kv_by_drafter(d.kv_capacity_bytes() / per)
        t0, d0 = workers[0].model, workers[0].drafter
        self.pools[tgt.name] = PoolRuntime(tgt, workers, t0.power_w * tgt.workers, t0.chips * tgt.workers, t0.name)
        self.pools[dr.name] = PoolRuntime(dr, [], d0.power_w * dr.workers, d0.chips * dr.workers, d0.name, shares)

    # --- request flow ------------------------------------------------------------------------
    def _count(self, delta: int, now: float) -> None:
        self.n_integral += self.in_system * (now - self.n_last_t)
        self.n_last_t = now
        self.in_system += delta

    def _candidates(self, req: Request) -> list[Worker]:
        classes = self.fleet.router.classes
        if not classes or not req.klass:  # unclassified requests may go to any entry pool
            return self._all_entry_workers
        ws = self._class_workers.get(req.klass)
        if ws is None:
            names = classes.get(req.klass)
            ws = [w for n in names for w in self.pools[n].workers] if names else []
            self._class_workers[req.klass] = ws
        return ws

    def _on_arrival(self, req: Request) -> None:
        now = self.engine.now
        self.requests.append(req)
        self._count(+1, now)
        if now >= self.occupancy.next_s:
            self.occupancy.offer(now)
        self._schedule_next_arrival()
        if self.context_window and req.isl >= self.context_window:
            self.reject(req, "context_window: the prompt is longer than the model's context window")
            return
        ws = self._candidates(req)
        if not ws:
            self.reject(req, f"no pool serves request class {req.klass!r}")
            return
        w = self._session_pick(req, ws, 0) if req.session_hash_base >= 0 else self.router.pick(req, ws)
        w.submit(req)

    def _schedule_next_arrival(self) -> None:
        if self._arrivals is None:
            return
        nxt = next(self._arrivals, None)
        if nxt is not None:
            self.engine.schedule(nxt.arrival_s, EventKind.ARRIVAL, self._on_arrival, nxt)

    def reject(self, req: Request, reason: str) -> None:
        """Report a request that cannot be served, with the reason."""
        req.status = REJECTED
        req.reason = reason
        self._count(-1, self.engine.now)
        if req.session_hash_base >= 0:  # a session cut short holds nothing any more
            self._close_session(req)

    def complete(self, req: Request, t: float) -> None:
        """A request produced its last token at `t`."""
        req.status = DONE
        self.completed += 1
        self._count(-1, self.engine.now)
        if self.engine.now >= self.occupancy.next_s:
            self.occupancy.offer(self.engine.now)
        if req.last_turn and req.session_hash_base >= 0:
            self._close_session(req)
        for nxt in self.workload.on_complete(req, t):
            self.engine.schedule(nxt.arrival_s, EventKind.ARRIVAL, self._on_arrival, nxt)

    def _session_pick(self, req: Request, ws: list[Worker], side: int) -> Worker:
        """The worker for a session's turn (`side` 0: entry pools, 1: the decode pool). With session affinity
        the turn goes home (the worker that holds its KV) unless home has requests waiting; otherwise the
        router's KV cost decides. A move leaves a stale copy behind: it stops being a held session there
        (evictable first), since the session's context moves on without it."""
        key = (side, req.session)
        home = self._homes.get(key)
        # (sessions parked under `hold` wait for room, but a held session's turn goes ahead of them)
        if (home is not None and self.fleet.router.session_affinity and not home.waiting and not home.inbox
                and home in ws):
            return home
        w = self.router.pick(req, ws)
        if home is not w:
            self._homes[key] = w
            if home is not None:
                home.kv.close_session(req.session, req.unit_ids(req.isl))
                if home.parked and not home.busy:
                    home.plan()
        return w

    def move_session(self, req: Request, src: Worker) -> bool:
        """`hold` would park a session with nothing resident on `src`: send it instead to the least loaded
        candidate that has room for it now (its queue empty). False if none has (it waits at `src`)."""
        best = None
        for w in self._candidates(req):
            if w is not src and w.room_for_newcomer(req) and (best is None or w.active_tokens() < best.active_tokens()):
                best = w
        if best is None:
            return False
        src.queued_tokens -= req.isl + req.generated
        self._homes[(0, req.session)] = best
        src.kv.close_session(req.session, req.unit_ids(req.isl))
        best.submit(req)
        return True

    def _close_session(self, req: Request) -> None:
        """A session ended: the workers that kept its KV no longer hold it for a next turn."""
        ids = req.unit_ids(req.isl + req.osl)
        for side, (pool, index) in enumerate(((req.pool, req.worker), (req.decode_pool, req.decode_worker))):
            rt = self.pools.get(pool)
            if rt is None or not (0 <= index < len(rt.workers)):
                continue
            w = rt.workers[index]
            self._homes.pop((side, req.session), None)
            w.kv.close_session(req.session, ids)
            if w.parked and not w.busy:
                w.plan()

    def handoff(self, req: Request, src: Worker, t_ready: float) -> None:
        """PD: `req` is prefilled on `src` at `t_ready`. Its KV stays there until a decode worker has taken the
        request and allocated room for it (`pull_kv`): no KV is ever in neither place (docs/serving.md)."""
        pool = self._decode_pool
        dst = self._session_pick(req, pool.workers, 1) if req.session_hash_base >= 0 else self.router.pick(req, pool.workers)
        req.decode_pool, req.decode_worker = pool.name, dst.index
        req.kv_source = src
        if t_ready <= self.engine.now:
            dst.submit(req)
        else:
            self.engine.schedule(t_ready, EventKind.TIMER, dst.submit, req)

    def pull_kv(self, req: Request, dst: Worker, held_units: int) -> None:
        """Decode worker `dst` has taken `req` and allocated its KV: the blocks it does not already hold (a
        session's earlier turns stay there) cross from the prefill worker now; that worker frees its copy, and
        `dst` starts decoding it, when they have arrived."""
        src = req.kv_source
        ctx = req.isl + req.generated
        nbytes = src.model.kv_bytes(ctx) - src.model.kv_bytes(held_units * req.hash_block_tokens)
        now = self.engine.now
        done = self._prefill_link.transfer(now, nbytes)
        req.handoff_s = done - now
        charge, units = src.detach_handoff(req)
        self.engine.schedule(done, EventKind.TRANSFER_DONE, self._on_transfer, (req, src, dst, charge, units))

    def _on_transfer(self, arg: tuple[Request, Worker, Worker, float, tuple[int, ...]]) -> None:
        req, src, dst, charge, units = arg
        req.kv_source = None
        src.release_handoff(req, charge, units)
        dst.kv_arrived(req)

    def drop_handoff(self, req: Request) -> None:
        """A prefilled request no decode worker can ever hold: its prefill worker frees its KV."""
        src = req.kv_source
        req.kv_source = None
        src.release_handoff(req, *src.detach_handoff(req))

    # --- run ---------------------------------------------------------------------------------
    @gc_paused  # every request, unit and table entry lives to the end: the collector's rescans cost half the run
    def run(self, on_progress: Callable[[float], None] | None = None) -> Simulation:
        self._arrivals = self.workload.arrivals()
        self._schedule_next_arrival()
        self.engine.on_progress = on_progress
        self.engine.run(self.horizon_s if self.horizon_s is not None else float("inf"))
        self._count(0, self.engine.now)
        for w in self.workers():
            w._kv_account(self.engine.now)
        self.occupancy.record(self.engine.now)
        return self

    def workers(self) -> list[Worker]:
        return [w for p in self.pools.values() for w in p.workers]
