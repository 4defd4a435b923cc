"""External-drafter speculative decoding: the drafter runs on its own pool, the target verifies.

A `SpecWorker` is a target replica (its StepModel's `verify`) paired with a
share of a drafter replica (another StepModel, e.g. a small model on LPX).
Each decode round: the drafter proposes k tokens per sequence (k sequential
drafter decode steps, time-shared with the other targets using the same
drafter), the draft tokens cross the link, the target scores k+1 positions,
and the accept decisions plus the target's hidden states for the drafter
cross back. Each sequence then gains 1 + (accepted) tokens, where the number
accepted is drawn per token from the request's own acceptance rate (drawn
once per request from the workload's distribution, e.g. Beta). Draft length
is fixed, or adaptive: the k in [1, max] maximising expected tokens per
second of round time, using the acceptance rate this worker has observed
so far (prior 0.7 weighted as 10 drafts).
"""

from __future__ import annotations

import math

from lpxsim.serving.request import Request
from lpxsim.serving.worker import SharedResource, Worker, ctx_bucket
from lpxsim.step.protocol import DecodeBatch, StepModel

TOKEN_ID_BYTES = 4
PRIOR_ACCEPT, PRIOR_WEIGHT = 0.7, 10.0


class Link:
    """A point-to-point link with FIFO contention: transfers queue behind each other."""

    __slots__ = ("name", "bandwidth_Bps", "latency_s", "free_at", "bytes_sent", "busy_s")

    def __init__(self, name: str, bandwidth_Bps: float, latency_s: float) -> None:
        self.name = name
        self.bandwidth_Bps = float(bandwidth_Bps)
        self.latency_s = float(latency_s)
        self.free_at = 0.0
        self.bytes_sent = 0.0
        self.busy_s = 0.0

    def transfer(self, now: float, nbytes: float) -> float:
        """Queue `nbytes` at `now`; returns when the last byte arrives."""
        start = max(now, self.free_at)
        dur = nbytes / self.bandwidth_Bps
        self.free_at = start + dur
        self.bytes_sent += nbytes
        self.busy_s += dur
        return start + dur + self.latency_s


class SpecWorker(Worker):
    """A target replica decoding with drafts from a (shared) external drafter."""

    def __init__(self, sim, pool: str, index: int, model: StepModel, sched, drafter: StepModel,
                 drafter_share: SharedResource, link: Link, spec, hidden_bytes: float,
                 role: str = "aggregated") -> None:
        self.drafter = drafter
        self.dshare = drafter_share
        self.link = link
        self.k_fixed = int(spec.draft_tokens)
        self.k_max = int(spec.max_draft_tokens)
        self.adaptive = bool(spec.adaptive)
        self.hidden_bytes = float(hidden_bytes)
        self.active: list[Request] = []
        self.proposed = 0
        self.accepted = 0
        self.k = self.k_fixed
        self._round: dict = {}
        self._kbest: dict = {}
        self._ubuf: list[float] = []
        self._upos = 0
        c = drafter.decode_step(DecodeBatch.uniform(1, 1024))
        self.dslots = max(1, round(c.latency_s / c.interval_s)) if c.interval_s > 0 else 1
        super().__init__(sim, pool, index, model, sched, role=role)

    DRAFTER_KV_CONTEXT = 32_768  # context at which the target's and drafter's KV per token are compared

    def limit_kv_by_drafter(self, drafter_kv_bytes: float) -> None:
        """The drafter keeps its own KV of every sequence and session this target holds, in `drafter_kv_bytes`
        (this target's share of its drafter replica). Both hold the same tokens, so the target holds no more
        than the drafter's share has room for, in target bytes (ratio of KV per token at DRAFTER_KV_CONTEXT)."""
        c = self.DRAFTER_KV_CONTEXT
        per_tok = self.drafter.kv_bytes(c)
        if per_tok <= 0:
            return
        cap = drafter_kv_bytes * self.model.kv_bytes(c) / per_tok
        if cap < self.kv.capacity:
            self.headroom *= cap / self.kv.capacity
            self.kv.capacity = cap

    def round_time(self, n: int, ctx: float, k: int) -> float:
        """One draft-verify round for `n` sequences at mean context `ctx` with `k` draft tokens."""
        c = ctx_bucket(ctx)
        key = (n, c, k, self.dshare.active)
        t = self._round.get(key)
        if t is None:
            slots = min(n, self.dslots)
            d = self.drafter.decode_step(DecodeBatch.uniform(-(-n // slots), c))
            draft = k * max(d.latency_s, slots * d.interval_s * max(1, self.dshare.active))
            verify = self.model.verify(DecodeBatch.uniform(n, c), k).latency_s
            nbytes = n * (k * TOKEN_ID_BYTES + (k + 1) * self.hidden_bytes)
            xfer = 2 * self.link.latency_s + nbytes / self.link.bandwidth_Bps
            t = self._round[key] = draft + xfer + verify
        return t

    def _choose_k(self, n: int, ctx: float) -> int:
        if not self.adaptive:
            return self.k_fixed
        a = min(0.999, (self.accepted + PRIOR_ACCEPT * PRIOR_WEIGHT) / (self.proposed + PRIOR_WEIGHT))
        key = (n, ctx_bucket(ctx), self.dshare.active, round(a, 3))
        best = self._kbest.get(key)
        if best is None:
            best, best_rate = 1, -1.0
            for k in range(1, self.k_max + 1):
                rate = (1 - a ** (k + 1)) / (1 - a) / self.round_time(n, ctx, k)
                if rate > best_rate:
                    best, best_rate = k, rate
            self._kbest[key] = best
        return best

    def period(self, n: int, ctx: float) -> float:
        return self.round_time(n, ctx, self.k)

    def _plan_decode(self) -> None:
        n = self.n_dec
        self.k = self._choose_k(n, self.ctx_sum / n)
        if not self._room_for(self.k + 1):
            self._preempt()
            return self.plan()
        now = self.engine.now
        self.run_chunks = None
        self.run_start, self.run_k, self.run_dt = now, 1, self.period(n, self.ctx_sum / n)
        self._start(now + self.run_dt)

    def _plan_mixed(self) -> None:
        if self.n_dec:
            self.k = self._choose_k(self.n_dec, self.ctx_sum / self.n_dec)
            if not self._room_for(self.k + 1):
                self._preempt()
                return self.plan()
        super()._plan_mixed()

    def _room_for(self, steps: int) -> bool:
        return self.kv.make_room(self.g_sum * steps)

    def _uniform(self) -> float:
        """Next uniform from a buffer filled by the run's generator (same seed, same draws)."""
        if self._upos >= len(self._ubuf):
            self._refill()
        self._upos += 1
        return self._ubuf[self._upos - 1]

    def _refill(self) -> None:
        self._ubuf = self.sim.engine.rng.random(4096).tolist()
        self._upos = 0

    def _uniforms(self, m: int) -> list[float]:
        """The next `m` uniforms of `_uniform`'s stream, in its order (the same buffer, refilled the same way)."""
        out: list[float] = []
        while m > 0:
            if self._upos >= len(self._ubuf):
                self._refill()
            take = min(m, len(self._ubuf) - self._upos)
            out += self._ubuf[self._upos:self._upos + take]
            self._upos += take
            m -= take
        return out

    def _accepted_all(self, active: list, k: int) -> list[int]:
        """`_accepted` of each active sequence in turn (the verify of one round)."""
        return [self._accepted(r.accept_rate, k) for r in active]

    def _accepted(self, alpha: float, k: int) -> int:
        """Leading accepted drafts of k, each accepted with probability alpha: P(>= j) = alpha^j."""
        if alpha <= 0.0:
            return 0
        if alpha >= 1.0:
            return k
        u = 1.0 - self._uniform()  # in (0, 1]
        return min(k, int(math.log(u) / math.log(alpha)))

    def _advance(self, k: int, dt: float) -> None:
        active = self.active
        n = len(active)
        kd = self.k
        finished = []
        total = acc_sum = 0
        for r, a in zip(active, self._accepted_all(active, kd), strict=True):
            acc_sum += a
            t = min(a + 1, r.osl - r.generated)
            r.generated += t
            grow = r.kv_growth * t
            r.kv_charge += grow
            self.kv.charge(grow)
            self.ctx_sum += t
            total += t
            r.spec_rounds += 1
            r.spec_accepted += a
            if r.generated >= r.osl:
                finished.append(r)
        self.steps += 1
        self.proposed += n * kd
        self.accepted += acc_sum
        self.tokens_out += total
        self.itl.append((dt, n))
        if total > n:
            self.itl.append((0.0, total - n))
        for r in finished:
            self._finish(r)

    def _join(self, req: Request) -> None:
        ctx = req.isl + req.generated
        req.ctx0 = ctx
        req.join_step = self.steps
        g = self.g_all if ctx < self.window_ctx else self.g_full
        req.kv_growth = g
        self.g_sum += g
        self.n_dec += 1
        self.ctx_sum += ctx
        self.active.append(req)

    def _leave(self, req: Request) -> int:
        ctx = req.isl + req.generated
        self.active.remove(req)
        self.n_dec -= 1
        self.ctx_sum -= ctx
        self.g_sum -= req.kv_growth
        if self.n_dec == 0:
            self.g_sum = 0.0
        return ctx

    def _pick_victim(self) -> Request:
        """The most recently joined sequence (speculative workers keep an active list, not a heap)."""
        return max(self.active, key=lambda r: (r.join_step, r.rid))

    def _set_busy(self, busy: bool) -> None:
        if busy != self.busy:
            self.dshare.change(1 if busy else -1, self.engine.now)
        super()._set_busy(busy)
