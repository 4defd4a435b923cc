"""A worker: one model replica doing continuous batching with chunked prefill over a StepModel.

Scheduling (vLLM v1 / Sarathi style): every step runs one decode token for
every running sequence; if prompts are waiting, the step also carries prefill
chunks from the token budget left over (at least `min_chunk` tokens, so prefill
never starves). Steps without prefill are fast-forwarded: the worker computes
how many decode steps run before the next completion or the KV limit, and
schedules one event for the whole run; an arrival cuts the run at the next
step boundary. A pipelined prefill's first token leaves after its step ends:
the sequence joins at the first step boundary after that, so a run planned
while one is in flight ends at that boundary (no event of its own). Costs come
only from the StepModel:

* decode: the running set of n sequences is cut into m micro-batches (the best
  m of 1, 2, 4, ..., n). Each sequence then produces one token every
  max(latency(b), m * interval(b)) seconds, b = ceil(n / m); on a GPU m = 1.
* mixed step: that decode period plus the prefill chunk's interval; the
  chunk's first token appears after its latency.

Contexts are given to the StepModel as a uniform batch at the mean context,
rounded to a bucket of max(256 tokens, ~1.6 %) so costs can be cached.
Preemption is by recompute (the newest sequence gives back its KV and
re-prefills prompt + generated tokens later).

A model whose engine polls for new requests (`admission_poll`: SGLang's
--scheduler-recv-interval as InferenceX launches it) holds an arrival in an
inbox until the scheduler reads it: every N decode steps, at once after a step
that carried a prefill, and at once when idle (an idle loop spins), as
`engine.steady_state.poll_wait_steps` prices it (SGL-RECV). A model whose engine
balances attention-DP ranks (`admission_hold`: TensorRT-LLM's attention_dp_config)
puts each arrival on the rank with the fewest requests and holds the waiting
prefills until every rank has one, until `timeout` iterations after the hold
began, or while some rank runs no decode (TRT-ADP), as
`engine.steady_state.admission_hold_steps` prices it.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import TYPE_CHECKING

from lpxsim.core.errors import DoesNotFit
from lpxsim.serving.admission import Admission
from lpxsim.serving.engine import EventKind
from lpxsim.serving.kvcache import KvStore
from lpxsim.serving.request import Request
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepModel

if TYPE_CHECKING:
    from lpxsim.serving.sim import Simulation


def ctx_bucket(ctx: float) -> int:
    """Round a context to max(256 tokens, 1/64 of its magnitude) so step costs can be cached."""
    c = int(ctx)
    q = max(256, 1 << max(0, c.bit_length() - 7))
    return max(1, ((c + q // 2) // q) * q)


class SharedResource:
    """A resource several workers time-share (an FFN rack behind attention GPUs, a drafter rack)."""

    __slots__ = ("name", "active", "busy_s", "_since")

    def __init__(self, name: str) -> None:
        self.name = name
        self.active = 0  # workers using it right now
        self.busy_s = 0.0  # time with at least one user (its utilisation numerator)
        self._since = 0.0

    def change(self, delta: int, now: float) -> None:
        if self.active == 0 and delta > 0:
            self._since = now
        self.active += delta
        if self.active == 0 and delta < 0:
            self.busy_s += now - self._since

    def busy_until(self, now: float) -> float:
        """Busy time up to `now`, counting a use still in progress."""
        return self.busy_s + (now - self._since if self.active > 0 else 0.0)


class Worker(Admission):
    """One replica. `role`: aggregated | prefill (hands KV off after the first token) | decode."""

    _board = None  # class defaults: a subclass may touch the load before Worker.__init__ runs
    _slot = 0
    _ctx_sum = 0
    _queued_tokens = 0

    def __init__(self, sim: Simulation, pool: str, index: int, model: StepModel, sched, role: str,
                 share: SharedResource | None = None) -> None:
        self.sim = sim
        self.engine = sim.engine
        self.pool = pool
        self.index = index
        self.model = model
        self.role = role
        self.share = share
        retention = sim.fleet.retention
        cap = model.kv_capacity_bytes()
        tier = sim.make_tier(pool, index)
        policy = retention.policy if retention.policy != "auto" else ("evict_idle" if tier else "hold")
        self.kv = KvStore(cap, session_whole=policy != "lru", tier=tier, resident=sim.resident_count(pool))
        self.hold = policy == "hold"
        self.headroom = retention.headroom * cap
        self.parked: deque[Request] = deque()  # hold: sessions with nothing resident, waiting for room
        self.loading = 0  # admitted sequences whose KV is on its way (from the offload tier or a prefill worker)
        self.block = int(sched.block_tokens)
        self.budget = int(sched.token_budget)
        self.min_chunk = int(sched.min_chunk_tokens)
        self.max_run = int(sched.max_run_steps)
        self.max_batch = max(1, min(int(sched.max_batch), int(model.max_batch())))
        self.waiting: deque[Request] = deque()
        # arrivals the engine's scheduler has not read yet (`admission_poll`; a decode worker takes hand-offs)
        self.poll = getattr(model, "admission_poll", None) if role != "decode" else None
        self.inbox: deque[Request] = deque()
        self.since_poll = 0  # decode steps since the scheduler last read (as of the current run's start)
        # attention-DP balance (`admission_hold`): each request's rank, engine iterations, the hold's start
        self.adp = getattr(model, "admission_hold", None) if role != "decode" else None
        # an engine that runs a prefill batch as its own forward (SGLang) has its first token out when the prefill
        # ends, before the step's decodes; otherwise the token comes with the whole step (`prefill_alone`)
        self.prefill_first = bool(getattr(model, "prefill_alone", False))
        self.rank_of: dict[int, int] = {}
        self.iterations = 0
        self.adp_since: int | None = None
        self.prefilling: deque[Request] = deque()
        self.finish_heap: list[tuple[int, int, Request]] = []
        self._board = None  # a KV-aware router's load board once it tracks this worker (`track`)
        self._slot = 0
        self.queued_tokens = 0
        self.n_dec = 0
        self.ctx_sum = 0
        self.g_sum = 0.0
        self.steps = 0
        self.busy = False
        self.version = 0
        self.run_start = 0.0
        self.run_dt = 0.0
        self.run_k = 0
        self.run_chunks: list[tuple[Request, int]] | None = None
        # pipelined first tokens still in flight: (time out, order, request), earliest first; the sequence
        # joins the decode set at the first step boundary strictly after its time (`_join_landed`)
        self.in_flight: list[tuple[float, int, Request]] = []
        self.landed: list[Request] = []  # hand-offs whose KV arrived while a step ran: they join at its end
        self._n_flown = 0
        self.run_first_tok = 0.0
        # Tables that depend only on the model (and block size): shared by the workers of a pool, so a
        # fleet of W replicas prices each shape once, not W times.
        shared = sim.model_tables.setdefault((id(model), self.block), {"kvb": {}, "period": {}, "sizes": {}})
        self._kvb: dict[int, float] = shared["kvb"]
        self._sizes: dict[int, list[float]] = shared["sizes"]  # unit tokens -> bytes of unit j
        self._period: dict = shared["period"] if share is None and type(self) is Worker else {}
        # statistics
        self.busy_s = 0.0
        self.tokens_out = 0
        self.kv_integral = 0.0
        self.kv_last_t = 0.0
        self.itl: list[tuple[float, int]] = []
        self.preemptions = 0
        self.rejected = 0
        self._init_kv_growth()

    # --- load as a KV-aware router tracks it -------------------------------------------
    @property
    def ctx_sum(self) -> int:
        """Context tokens of the running sequences."""
        return self._ctx_sum

    @ctx_sum.setter
    def ctx_sum(self, v: int) -> None:
        self._ctx_sum = v
        if self._board is not None:
            self._board.ctx[self._slot] = v

    @property
    def queued_tokens(self) -> int:
        """Tokens of the requests waiting or prefilling here."""
        return self._queued_tokens

    @queued_tokens.setter
    def queued_tokens(self, v: int) -> None:
        self._queued_tokens = v
        if self._board is not None:
            self._board.queued[self._slot] = v

    def track(self, board, slot: int) -> None:
        """Publish this worker's load and resident prefix units to a router's board, under `slot`."""
        self._board, self._slot = board, slot
        board.ctx[slot], board.queued[slot] = self._ctx_sum, self._queued_tokens
        self.kv.track(board.holders, 1 << slot, board.chains, slot)

    # --- cost helpers ---------------------------------------------------------------
    def _init_kv_growth(self) -> None:
        shared = self.sim.model_tables[(id(self.model), self.block)]
        if "growth" in shared:
            self.g_all, self.g_full, self.window_ctx = shared["growth"]
            return
        m = self.model
        self.g_all = m.kv_bytes(2) - m.kv_bytes(1)  # every layer grows (below the sliding windows)
        far = 1 << 22
        self.g_full = m.kv_bytes(far + 1) - m.kv_bytes(far)  # only full-attention layers grow
        w = 1
        while w < far and m.kv_bytes(w + 1) - m.kv_bytes(w) > self.g_full + 1e-9:
            w *= 2
        self.window_ctx = w  # beyond this context only full-attention layers grow
        shared["growth"] = (self.g_all, self.g_full, self.window_ctx)

    def kvb(self, tokens: int) -> float:
        """KV bytes of one sequence of `tokens` tokens, rounded up to whole blocks (cached)."""
        t = -(-tokens // self.block) * self.block
        b = self._kvb.get(t)
        if b is None:
            b = self._kvb[t] = float(self.model.kv_bytes(t))
        return b

    def _unit_sizes(self, unit: int, n: int) -> list[float]:
        """Bytes of each of the first `n` (or more) prefix units of `unit` tokens: unit j holds the KV between
        its edges, kvb((j + 1) x unit) - kvb(j x unit). One table per model, block and unit size, grown on demand."""
        table = self._sizes.get(unit)
        if table is None:
            table = self._sizes[unit] = []
        if len(table) < n:
            kvb = self.kvb
            lo = kvb(len(table) * unit)
            for j in range(len(table), n):
                hi = kvb((j + 1) * unit)
                table.append(hi - lo)
                lo = hi
        return table

    def period(self, n: int, ctx: float) -> float:
        """Seconds between successive tokens of each of `n` running sequences at mean context `ctx`.

        The running set is cut into m micro-batches (m in 1, 2, 4, ..., n; the best is taken, as
        `lpxsim.plan.estimate` does): the period is max(latency(b), m x interval(b)), b = ceil(n/m).
        On a GPU (latency == interval) m = 1 wins; on a pipelined LPX several are in flight.
        """
        c = ctx_bucket(ctx)
        key = (n, c, self.share.active if self.share is not None else 0)
        p = self._period.get(key)
        if p is None:
            p = math.inf
            m = 1
            refused: DoesNotFit | None = None
            while True:
                b = -(-n // m)
                try:
                    cost = self.model.decode_step(DecodeBatch.uniform(b, c))
                    p = min(p, max(cost.latency_s, m * cost.interval_s))
                except DoesNotFit as e:  # a shape the backend cannot hold is not a scheduling option
                    refused = e
                if m >= n:
                    break
                m = min(n, m * 2)
            if math.isinf(p):
                raise refused  # type: ignore[misc]
            self._period[key] = p
        return p

    # --- load as the router sees it ---------------------------------------------------
    def active_tokens(self) -> int:
        """Tokens of KV this worker holds or has queued (Dynamo's decode_blocks x block size)."""
        return self.ctx_sum + self.queued_tokens

    def load(self) -> int:
        return self.n_dec + len(self.prefilling) + len(self.waiting) + len(self.inbox) + len(self.parked) + self.loading

    # --- entry points -----------------------------------------------------------------
    def submit(self, req: Request) -> None:
        """A request arrives (new, re-queued, or prefilled elsewhere with its KV)."""
        if self.role != "decode":  # a decode worker's place is recorded at the hand-off
            req.pool, req.worker = self.pool, self.index
        if req.session_hash_base >= 0:
            self.kv.retire_stale(req.session, req.session_hash_base)
        self.queued_tokens += req.isl + req.generated
        if self.adp is not None and req.rid not in self.rank_of:  # the rank with the fewest requests
            counts = [0] * self.adp[0]
            for rank in self.rank_of.values():
                counts[rank] += 1
            self.rank_of[req.rid] = counts.index(min(counts))
        if self.poll is not None and self.busy:  # read at the scheduler's next poll
            self.inbox.append(req)
            if self.run_chunks is None and self.run_k > 1:
                self._cut_run(at_poll=True)
            return
        self.waiting.append(req)
        if not self.busy:
            self.plan()
        elif self.run_chunks is None and self.run_k > 1:
            self._cut_run()

    def _cut_run(self, at_poll: bool = False) -> None:
        """End the current fast-forwarded decode run at the next step boundary (`at_poll`: at the boundary where
        the scheduler next reads new requests)."""
        at = int((self.engine.now - self.run_start) / self.run_dt) + 1
        if at_poll:
            at += (-(self.since_poll + at)) % self.poll_every()
        if at < self.run_k:
            self.version += 1
            self.run_k = at
            self.engine.schedule(self.run_start + at * self.run_dt, EventKind.STEP_END, self._on_step_end,
                                 self.version)

    def poll_every(self) -> int:
        """Decode steps between the scheduler's reads of new requests (`admission_poll`: the interval below or
        at and above its concurrency threshold; the sequences this worker holds stand for the concurrency)."""
        threshold, below, above = self.poll
        held = self.n_dec + len(self.prefilling) + len(self.waiting) + len(self.inbox)
        return max(1, below if held < threshold else above)

    def adp_holding(self) -> bool:
        """Whether the attention-DP balance holds the waiting prefills now: some rank has none waiting, every
        rank runs a decode, and the hold began fewer than `timeout` iterations ago (`admission_hold`)."""
        ranks, timeout, _ = self.adp
        rank_of = self.rank_of
        if (not self.waiting or len({rank_of.get(r.rid, 0) for r in self.waiting}) >= ranks
                or len({rank_of.get(e[2].rid, 0) for e in self.finish_heap}) < ranks):
            self.adp_since = None
            return False
        if self.adp_since is None:
            self.adp_since = self.iterations
        if self.iterations - self.adp_since >= timeout:
            self.adp_since = None
            return False
        return True

    def _read_inbox(self) -> None:
        self.waiting.extend(self.inbox)
        self.inbox.clear()
        self.since_poll = 0

    # --- planning ---------------------------------------------------------------------
    def plan(self) -> None:
        """Choose the next step (mixed prefill+decode, or a fast-forwarded decode run) or go idle."""
        self._admit()
        if self.prefilling:
            self._plan_mixed()
        elif self.n_dec:
            self._plan_decode()
        elif self.inbox:  # idle: the scheduler's loop spins and reads at once
            self._read_inbox()
            self.plan()
        else:
            self._set_busy(False)
            if self.in_flight:  # idle: the next first token to land wakes the worker
                self.engine.schedule(self.in_flight[0][0], EventKind.JOIN, self._on_join)

    def _set_busy(self, busy: bool) -> None:
        if busy != self.busy:
            self.busy = busy
            if self.share is not None:
                self.share.change(1 if busy else -1, self.engine.now)

    def _plan_mixed(self) -> None:
        left = max(self.budget - self.n_dec, self.min_chunk)
        chunks: list[tuple[Request, int]] = []
        tok = ctx = 0
        for req in self.prefilling:
            if left <= 0:
                break
            t = min(req.prefill_left, left)
            chunks.append((req, t))
            left -= t
            tok += t
            ctx += req.prefill_ctx
        if self.n_dec and not self._room_for(1):
            self._preempt()
            return self.plan()
        dec = self.period(self.n_dec, self.ctx_sum / self.n_dec) if self.n_dec else 0.0
        n = len(chunks)
        try:
            cost = self.model.prefill(PrefillChunk(tokens=max(1, round(tok / n)), context=ctx // n, sequences=n))
        except DoesNotFit:
            if tok <= 1:
                raise
            # the backend cannot hold this chunk: this worker prefills in smaller chunks from now on
            self.budget = max(1, min(self.budget, tok) // 2)
            self.min_chunk = min(self.min_chunk, self.budget)
            return self._plan_mixed()
        now = self.engine.now
        self.run_chunks = chunks
        self.run_start, self.run_k = now, 1
        self.run_dt = dec + cost.interval_s
        end = now + self.run_dt
        if self.prefill_first:
            self.run_first_tok = now + cost.latency_s
        else:  # serial backends (latency == interval): out when the step ends (no float drift)
            self.run_first_tok = end if cost.latency_s <= cost.interval_s else now + dec + cost.latency_s
        self._start(end)

    def _room_for(self, steps: int) -> bool:
        return self.kv.make_room(self.g_sum * steps)

    def _plan_decode(self) -> None:
        k = self.finish_heap[0][0] - self.steps
        if self.g_sum > 0:
            k = min(k, int(self.kv.free_total() // self.g_sum))
        k = min(k, self.max_run)
        if k < 1:
            self._preempt()
            return self.plan()
        if self.inbox:  # unread arrivals: the run ends where the scheduler reads them
            k = min(k, max(1, self.poll_every() - self.since_poll))
        if self.adp_since is not None:  # held prefills: the run ends when the hold times out
            k = min(k, max(1, self.adp_since + self.adp[1] - self.iterations))
        self._room_for(k)
        dt = self.period(self.n_dec, self.ctx_sum / self.n_dec + k / 2)
        now = self.engine.now
        if self.in_flight:  # the run ends at the step boundary after the next first token lands
            k = min(k, int((self.in_flight[0][0] - now) / dt) + 1)
        self.run_chunks = None
        self.run_start, self.run_k, self.run_dt = now, k, dt
        self._start(now + k * dt)

    def _start(self, end: float) -> None:
        self._set_busy(True)
        self.version += 1
        self.engine.schedule(end, EventKind.STEP_END, self._on_step_end, self.version)

    # --- step completion ----------------------------------------------------------------
    def _on_step_end(self, version: int) -> None:
        if version != self.version:
            return
        now = self.engine.now
        self._kv_account(now)
        k = self.run_k
        self.iterations += k
        self.busy_s += now - self.run_start
        if self.n_dec:
            self._advance(k, (now - self.run_start) / k)
        chunks = self.run_chunks
        if chunks is not None:
            self.run_chunks = None
            for req, t in chunks:
                req.prefill_left -= t
                req.prefill_ctx += t
                self.queued_tokens -= t
                if req.prefill_left == 0:
                    self.prefilling.remove(req)
                    self._prefill_done(req, max(now, self.run_first_tok))
        flight = self.in_flight
        while flight and flight[0][0] < now:
            self._join(heapq.heappop(flight)[2])
        if self.landed:  # hand-offs whose KV arrived during the run
            for req in self.landed:
                self._join(req)
            self.loading -= len(self.landed)
            self.landed.clear()
        if self.poll is not None:
            self._poll_after(k, chunks is not None)
        self._set_busy(False)
        self.plan()

    def _poll_after(self, steps: int, prefilled: bool) -> None:
        """The scheduler's reads over a finished run of `steps` steps: after a step that carried a prefill it
        reads at once; otherwise every `poll_every` decode steps (a read that finds nothing still resets)."""
        if prefilled:
            self._read_inbox()
            return
        self.since_poll += steps
        every = self.poll_every()
        if self.since_poll >= every:
            if self.inbox:
                self._read_inbox()
            else:
                self.since_poll %= every

    def _kv_account(self, now: float) -> None:
        self.kv_integral += self.kv.used * (now - self.kv_last_t)
        self.kv_last_t = now
        if self.kv.used > self.kv.peak:
            self.kv.peak = self.kv.used

    def _advance(self, k: int, dt: float) -> None:
        n = self.n_dec
        self.steps += k
        self.ctx_sum += n * k
        self.kv.charge(self.g_sum * k)
        self.tokens_out += n * k
        self.itl.append((dt, n * k))
        heap = self.finish_heap
        while heap and heap[0][0] <= self.steps:
            self._finish(heapq.heappop(heap)[2])

    def _prefill_done(self, req: Request, t_tok: float) -> None:
        """The prompt (and any recomputed tokens) are in KV; the prefill produced one token."""
        self._cache_units(req, req.isl + req.generated, referenced=True)
        req.generated += 1
        self.tokens_out += 1
        # a prefill worker's token reaches the client with the decode worker's stream, when that worker has the
        # request's KV (Dynamo's flow, DYN-SGL-DISAGG: `kv_arrived` records it); a one-token request ends here
        if req.first_token_s != req.first_token_s and (self.role != "prefill" or req.generated >= req.osl):
            req.first_token_s = t_tok
        if req.generated >= req.osl or self.role == "prefill":
            self.rank_of.pop(req.rid, None)
        if req.generated >= req.osl:
            req.finish_s = t_tok
            self._release(req, req.isl + req.generated)
            self.sim.complete(req, t_tok)
        elif self.role == "prefill":
            self.sim.handoff(req, self, t_tok)
        elif t_tok <= self.engine.now:
            self._join(req)
        else:
            heapq.heappush(self.in_flight, (t_tok, self._n_flown, req))
            self._n_flown += 1

    def _on_join(self, _arg=None) -> None:
        """An idle worker's next pipelined first token has landed: that sequence joins now (a busy worker
        takes its landed ones in at its next step boundary, which its planned run already ends at)."""
        flight = self.in_flight
        if self.busy or not flight or flight[0][0] > self.engine.now:
            return
        self._join(heapq.heappop(flight)[2])
        self.plan()

    def _cache_units(self, req: Request, tokens: int, referenced: bool) -> None:
        ids = req.unit_ids(tokens)
        have = len(req.units_ref)
        if len(ids) <= have:
            return
        sizes = self._unit_sizes(req.hash_block_tokens, len(ids))[have:len(ids)]
        new = ids[have:]
        chain = req.session_hash_base
        req.kv_charge -= self.kv.insert(new, sizes, referenced, req.session if chain >= 0 else -1,
                                        chain if chain >= 0 else None)
        if referenced:
            req.units_ref = ids

    # --- decode set -------------------------------------------------------------------
    def _join(self, req: Request) -> None:
        ctx = req.isl + req.generated
        req.ctx0 = ctx
        req.join_step = self.steps
        req.finish_step = self.steps + (req.osl - req.generated)
        g = self.g_all if ctx < self.window_ctx else self.g_full
        req.kv_growth = g
        self.g_sum += g
        self.n_dec += 1
        self.ctx_sum += ctx
        heapq.heappush(self.finish_heap, (req.finish_step, req.rid, req))

    def _leave(self, req: Request) -> int:
        """Remove from the decode set; returns its context now."""
        done = self.steps - req.join_step
        ctx = req.ctx0 + done
        self.n_dec -= 1
        self.ctx_sum -= ctx
        self.g_sum -= req.kv_growth
        req.kv_charge += req.kv_growth * done
        req.generated += done
        if self.n_dec == 0:  # clear float drift
            self.g_sum = 0.0
        return ctx

    def _finish(self, req: Request) -> None:
        self.rank_of.pop(req.rid, None)
        ctx = self._leave(req)
        now = self.engine.now
        req.finish_s = now
        self._release(req, ctx)
        self.sim.complete(req, now)

    def _release(self, req: Request, ctx: int) -> None:
        """Give back a sequence's KV; its complete units stay cached (evictable)."""
        if req.session_hash_base >= 0:
            self._cache_units(req, ctx, referenced=True)
        self._give_back(req, req.kv_charge, req.units_ref)
        req.kv_charge = 0.0
        req.units_ref = ()

    def _give_back(self, req: Request, charge: float, units: tuple[int, ...]) -> None:
        self.kv.release(units, req.session if req.session_hash_base >= 0 else -1)
        self.kv.free(charge)

    def detach_handoff(self, req: Request) -> tuple[float, tuple[int, ...]]:
        """A prefilled request leaves for a decode worker: the KV charge and pinned units it holds here, which
        stay held until its KV has crossed (`release_handoff`); the request's own fields pass to the decode
        worker."""
        if req.session_hash_base >= 0:
            self._cache_units(req, req.isl + req.generated, referenced=True)
        held = (req.kv_charge, req.units_ref)
        req.kv_charge, req.units_ref = 0.0, ()
        return held

    def release_handoff(self, req: Request, charge: float, units: tuple[int, ...]) -> None:
        """The KV of a prefilled request has reached the decode worker: free it here (complete units stay
        cached, evictable)."""
        self._kv_account(self.engine.now)
        self._give_back(req, charge, units)
        if not self.busy:
            self.plan()

    def kv_arrived(self, req: Request) -> None:
        """A request this decode worker took has its KV here: the prefill's token leaves with this worker's
        stream (Dynamo's flow, DYN-SGL-DISAGG) and the sequence joins the decode set at the next step boundary
        (it holds its batch slot, `loading`, until then)."""
        now = self.engine.now
        if req.first_token_s != req.first_token_s:
            req.first_token_s = now
        if self.busy:
            self.landed.append(req)
            if self.run_chunks is None and self.run_k > 1:
                self._cut_run()
        else:
            self.loading -= 1
            self._join(req)
            self.plan()

    def _pick_victim(self) -> Request:
        """The most recently joined decoding sequence, taken out of the finish heap."""
        heap = self.finish_heap
        victim = max(heap, key=lambda e: (e[2].join_step, e[2].rid))[2]
        heap.remove(next(e for e in heap if e[2] is victim))
        heapq.heapify(heap)
        return victim

    def _preempt(self) -> None:
        """Recompute preemption: the most recently joined sequence gives back its KV and re-queues."""
        victim = self._pick_victim()
        ctx = self._leave(victim)
        self._release(victim, ctx)
        victim.preemptions += 1
        self.preemptions += 1
        victim.handoff_s = float("nan")
        self.waiting.appendleft(victim)
        self.queued_tokens += victim.isl + victim.generated
