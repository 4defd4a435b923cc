"""Online mode: the fleet's event simulation driven by a caller's clock, one request at a time.

`simulate` runs a whole workload from start to end. A live endpoint needs the same simulation
incrementally: a request arrives at "now", the event loop advances to a later time, and the caller
asks how many tokens each request has produced by then and when the next one appears.
`OnlineSimulation` does this on an ordinary `Simulation` with no workload of its own, so requests
batch, queue, share KV, hit prefixes and are routed exactly as in `simulate`: the same arrivals at
the same times get the same token times (tests/test_serve_online.py checks it against `simulate`).

Reading tokens between events. A worker fast-forwards a decode run of k steps of dt as one event
(`worker.py`); a request decoding in it has produced `generated + (steps - join_step)` tokens at the
run's start and one more at every boundary `run_start + i * dt`. An arrival only cuts a run at its
next boundary, so a boundary already passed is final. A speculative worker's rounds are one event
each and update `generated` as they end. First tokens carry their own time (`first_token_s`, which a
pipelined prefill sets ahead of the event). This module is the one place that reads those worker
fields; `abort` is the one place that takes a request back out of a worker.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

from lpxsim.serving.config import FleetConfig
from lpxsim.serving.engine import EventKind
from lpxsim.serving.request import DONE, INCOMPLETE, Request
from lpxsim.serving.sim import Simulation
from lpxsim.serving.worker import Worker
from lpxsim.serving.workload import WorkloadConfig

ABORTED = "aborted"  # a request whose client went away; its KV and batch slot are given back
_STEP_EPS = 1e-6  # fraction of a step: a boundary reached up to float rounding counts as passed
_DENSE_BATCHES = 256  # warm-up prices every decode batch size up to this (GPU graph batches go to 256)
_COMPACT_EVERY = 1024  # forgotten requests between compactions of the simulation's request list


class OnlineSimulation:
    """A `Simulation` of `fleet` advanced by the caller; requests are submitted one at a time at `now_s`."""

    def __init__(self, fleet: FleetConfig, seed: int = 0, keep_finished: int = 100_000) -> None:
        # no arrivals of its own: the workload exists only for the simulation's bookkeeping (never run)
        idle = WorkloadConfig(name="online", num_requests=1)
        self.sim = Simulation(fleet, idle, seed=seed)
        self.engine = self.sim.engine
        self.workers: list[Worker] = self.sim.workers()
        self.live: dict[int, Request] = {}  # submitted and not yet forgotten
        self.finished: deque[Request] = deque(maxlen=keep_finished)  # for a timeline; bounded
        self._pending_abort: dict[int, Request] = {}
        self._abort_timed: set[int] = set()  # pending aborts with a retry already scheduled at a step boundary
        self._next_rid = 0
        self._forgotten = 0

    # --- clock --------------------------------------------------------------------------------
    @property
    def now_s(self) -> float:
        return self.engine.now

    def advance(self, t_s: float) -> None:
        """Process every event up to simulated time `t_s`; the clock then reads `t_s` (never goes back)."""
        if t_s <= self.engine.now:
            return
        self.engine.run(t_s)
        self.engine.now = t_s  # nothing is pending before t_s, so the clock may stand at it
        if self._pending_abort:
            for req in list(self._pending_abort.values()):
                if req.rid not in self._abort_timed:
                    self.abort(req)

    def next_event_s(self) -> float:
        """Simulated time of the next scheduled event (inf when the fleet is idle)."""
        heap = self.engine._heap
        return heap[0][0] if heap else math.inf

    # --- requests -------------------------------------------------------------------------------
    def submit(self, isl: int, osl: int, hash_ids: tuple[int, ...] = (), hash_block_tokens: int = 512,
               session_hash_base: int = -1, session: int = -1, klass: str = "") -> Request:
        """A request arriving now; it is routed at once (as `simulate` routes an arrival)."""
        req = Request(self._next_rid, self.engine.now, isl, osl, hash_ids=hash_ids,
                      hash_block_tokens=hash_block_tokens, session_hash_base=session_hash_base,
                      session=session, klass=klass)
        self._next_rid += 1
        self.live[req.rid] = req
        self.sim._on_arrival(req)
        return req

    def poll(self) -> tuple[dict[int, int], float]:
        """Tokens each live request has produced by now, and the simulated time the next token may appear.

        Returns ({rid: tokens}, next_s). A finished request reports its whole output; a rejected or
        aborted one what it produced before."""
        now = self.engine.now
        nxt = self.next_event_s()
        counts: dict[int, int] = {}
        live = self.live
        for w in self.workers:
            heap = w.finish_heap
            if not heap:
                continue
            in_run = 0
            if w.busy and w.run_dt > 0:
                in_run = min(w.run_k - 1, int((now - w.run_start) / w.run_dt + _STEP_EPS))
                nxt = min(nxt, w.run_start + (in_run + 1) * w.run_dt)
            base = w.steps + in_run
            for _, rid, req in heap:
                if rid in live:
                    counts[rid] = req.generated + base - req.join_step
        for rid, req in live.items():
            if rid in counts:
                continue
            if req.status == DONE:
                counts[rid] = req.osl
            elif req.first_token_s <= now:
                counts[rid] = req.generated
            else:  # no first token yet (NaN), or a pipelined first token still in flight
                counts[rid] = 0
                if req.first_token_s > now:
                    nxt = min(nxt, req.first_token_s)
        return counts, nxt

    def forget(self, req: Request) -> None:
        """The caller is done with `req`: stop tracking it (its result is kept in a bounded history)."""
        if self.live.pop(req.rid, None) is None:
            return
        if req.status == INCOMPLETE:  # an abort under way still completes as the simulation advances
            self.abort(req)
        else:
            self.finished.append(req)
        self._forgotten += 1
        if self._forgotten % _COMPACT_EVERY == 0:
            self._compact()

    def history(self) -> list[Request]:
        """Every request still known: the bounded history of finished ones, live ones, aborts under way."""
        seen = {r.rid: r for r in self.finished}
        seen.update(self.live)
        seen.update(self._pending_abort)
        return list(seen.values())

    def _compact(self) -> None:
        """Keep memory bounded in a long-lived server: drop finished requests and per-run ITL samples."""
        self.sim.requests = [r for r in self.sim.requests if r.status == INCOMPLETE]
        for w in self.workers:
            w.itl.clear()

    # --- aborts -----------------------------------------------------------------------------------
    def abort(self, req: Request) -> bool:
        """Take `req` out of the fleet (its client went away): its KV and its batch slot are freed.

        A request waiting in a queue leaves at once. One that is in the worker's current step leaves at
        the step's next boundary, as an engine drops an aborted sequence between steps; one in flight
        between workers (a PD transfer, a pipelined first token) leaves once it lands. Returns True once
        it is out."""
        if req.status != INCOMPLETE:
            self._pending_abort.pop(req.rid, None)
            return True
        w = self._holder(req)
        now = self.engine.now
        queue = None if w is None else w.waiting if req in w.waiting else w.inbox if req in w.inbox else None
        if queue is not None:
            queue.remove(req)
            w.rank_of.pop(req.rid, None)
            w.queued_tokens -= req.isl + req.generated
            self._aborted(req)
            return True
        member = w is not None and (req in w.prefilling or self._decoding(w, req))
        if not member:
            self._pending_abort[req.rid] = req  # retried as the simulation advances
            return False
        if not w.busy or w.run_start >= now:  # the current step starts now: plan it again without req
            self._take_out(w, req)
            return True
        if w.run_chunks is None and w.run_k > 1:
            w._cut_run()
        boundary = w.run_start + w.run_k * w.run_dt
        self._pending_abort[req.rid] = req
        if req.rid not in self._abort_timed:
            self._abort_timed.add(req.rid)
            self.engine.schedule(boundary, EventKind.TIMER, self._retry_abort, req)
        return False

    def _retry_abort(self, req: Request) -> None:
        self._abort_timed.discard(req.rid)
        if req.rid in self._pending_abort and self.abort(req):
            self._pending_abort.pop(req.rid, None)

    def _holder(self, req: Request) -> Worker | None:
        pool, index = (req.decode_pool, req.decode_worker) if req.decode_pool else (req.pool, req.worker)
        rt = self.sim.pools.get(pool)
        return rt.workers[index] if rt is not None and 0 <= index < len(rt.workers) else None

    @staticmethod
    def _decoding(w: Worker, req: Request) -> bool:
        active = getattr(w, "active", None)  # speculative workers keep a list instead of a heap
        if active is not None:
            return req in active
        return any(e[2] is req for e in w.finish_heap)

    def _take_out(self, w: Worker, req: Request) -> None:
        """Remove a member of a step that starts now and plan the step again (nothing of it has run)."""
        w._kv_account(self.engine.now)
        w.version += 1  # the step just planned is void
        w.run_chunks = None
        if req in w.prefilling:
            w.prefilling.remove(req)
            w.queued_tokens -= req.prefill_left
            ctx = req.prefill_ctx
        else:
            if getattr(w, "active", None) is None:
                w.finish_heap[:] = [e for e in w.finish_heap if e[2] is not req]
                heapq.heapify(w.finish_heap)
            ctx = w._leave(req)
        w._release(req, ctx)
        self._aborted(req)
        w._set_busy(False)
        w.plan()

    def _aborted(self, req: Request) -> None:
        req.status = ABORTED
        req.reason = "client disconnected"
        self.sim._count(-1, self.engine.now)
        self._pending_abort.pop(req.rid, None)
        if req.rid not in self.live:
            self.finished.append(req)

    # --- warm-up ------------------------------------------------------------------------------------
    def warm(self, max_context: int) -> int:
        """Price the step shapes serving will ask for up to `max_context` (so a compiled backend compiles them
        now, not while serving, on the server's event loop). Returns the shapes priced (`_warm_worker`)."""
        contexts = [256]
        while contexts[-1] * 4 < max_context:
            contexts.append(contexts[-1] * 4)
        contexts.append(max(256, max_context))
        priced = 0
        seen: set[int] = set()
        for w in self.workers:
            if id(w.model) not in seen:
                seen.add(id(w.model))
                priced += _warm_worker(w, contexts)
        return priced

    # --- state for metrics --------------------------------------------------------------------------
    def queue_depth(self) -> int:
        """Requests waiting for admission on any worker (not yet prefilling or decoding)."""
        return sum(len(w.waiting) + len(w.inbox) for w in self.workers)

    def running(self) -> int:
        """Sequences prefilling or decoding on any worker."""
        return sum(w.n_dec + len(w.prefilling) for w in self.workers)

    def kv_occupancy(self) -> float:
        """KV bytes in use over KV capacity, over every worker."""
        cap = sum(w.kv.capacity for w in self.workers)
        return sum(w.kv.used for w in self.workers) / cap if cap > 0 else 0.0

    def resident_units(self) -> int:
        """Prefix units (cached KV blocks of prompts and sessions) resident on any worker."""
        return sum(w.kv.unit_count() for w in self.workers)


def _warm_worker(w: Worker, contexts: list[int]) -> int:
    """Price one worker's shapes: decode at every batch up to _DENSE_BATCHES at the shortest context and at
    batches 1, 2, 4, ... its limit at each of `contexts`; prefill of one sequence in chunks of 4^k tokens at
    each context and of a fresh prompt (context 0) of 2^k tokens."""
    from lpxsim.core.errors import DoesNotFit
    from lpxsim.step.protocol import PrefillChunk

    priced = 0

    def price(fn, *args) -> bool:
        nonlocal priced
        try:
            fn(*args)
        except DoesNotFit:
            return False  # larger shapes of this family do not fit either
        priced += 1
        return True

    # every batch size once: a GPU backend prices decode per captured batch size (1, 2, 4, 8, 12, 16, 24, ...),
    # lowering one graph for each (~10 ms); other contexts reuse it
    for n in range(1, min(w.max_batch, _DENSE_BATCHES) + 1):
        if not price(w.period, n, contexts[0]):
            break
    batches = [1 << i for i in range(w.max_batch.bit_length()) if 1 << i <= w.max_batch]
    for ctx in contexts:
        for n in batches:
            if not price(w.period, n, ctx):
                break
        tokens = 1
        while tokens <= w.budget and price(w.model.prefill, PrefillChunk(tokens, max(0, ctx - tokens), 1)):
            tokens *= 4
    # fresh prompts: a GPU backend lowers a graph per token bucket (powers of two up to 512), an LPX one
    # compiles the sub-chunk sizes (powers of two) around a prompt's length
    tokens = 1
    while tokens <= w.budget and price(w.model.prefill, PrefillChunk(tokens, 0, 1)):
        tokens *= 2
    return priced
