"""Admission of waiting requests into a worker under the retention policy (the `Worker` mixin).

A request is admitted when its KV fits: the leading units of its prefix still
resident are pinned, the rest is charged, and room is made by evicting what the
policy allows. Under `hold`, a session with nothing resident may not evict a held
session: it moves to another worker with room, or waits (`parked`) behind the
sessions already waiting. Units in the worker's offload tier are reloaded when that
beats prefilling them again; the request starts its prefill when they arrive.
"""

from __future__ import annotations

from collections import deque

from lpxsim.core.errors import DoesNotFit
from lpxsim.serving.engine import EventKind
from lpxsim.serving.request import Request
from lpxsim.step.protocol import PrefillChunk

_ADMITTED, _NO_ROOM, _PARK = 0, 1, 2  # admission verdicts


class Admission:
    """Admission, parking and reloads of a `lpxsim.serving.worker.Worker` (which supplies the state)."""

    def _admit(self) -> None:
        if self.parked:
            self._admit_from(self.parked, True)
        if self.adp is None or not self.adp_holding():  # TensorRT-LLM's attention-DP balance may hold them
            self._admit_from(self.waiting, False)

    def _admit_from(self, queue: deque[Request], parked: bool) -> None:
        while queue and self.n_dec + len(self.prefilling) + self.loading < self.max_batch:
            req = queue[0]
            verdict = self._try_admit(req, parked)
            if verdict == _ADMITTED:
                queue.popleft()
            elif verdict == _PARK and not parked:  # hold: move to a worker with room, or wait here
                queue.popleft()
                if self.role == "decode" or not self.sim.move_session(req, self):
                    self.parked.append(req)
            else:
                break

    def _try_admit(self, req: Request, parked: bool) -> int:
        """Admit `req` if its KV fits under the retention policy (`_ADMITTED`; a rejection counts as one)."""
        kv = self.kv
        ctx = req.isl + req.generated
        # must fit alone with one step of growth to spare, so a lone sequence always makes progress
        if self.kvb(req.isl + req.osl) + self.g_all > kv.capacity:
            self.queued_tokens -= ctx
            self.rejected += 1
            if req.kv_source is not None:
                self.sim.drop_handoff(req)
            self.sim.reject(req, "kv_capacity: one sequence needs more KV than the worker holds")
            return _ADMITTED
        prefilled = req.kv_source is not None  # its KV waits on the prefill worker that computed it
        ids = req.unit_ids(ctx)
        unit = req.hash_block_tokens
        limit = (ctx - 1) // unit  # at least one token is always prefilled
        m = min(kv.match(ids), limit) if ids else 0
        r = 0  # units reloaded from the offload tier
        if kv.tier is not None and m < limit and not prefilled and ids:
            r = min(kv.tier.run(ids, m), limit - m)
            if r and not self._reload_pays(m * unit, r * unit):
                r = 0
        session = req.session if req.session_hash_base >= 0 else -1
        room = need = self.kvb(ctx + 1) - (self.kvb(m * unit) if m else 0.0)
        spare = self.hold and session >= 0 and m == 0
        if spare:  # nothing of this session is resident here: it may not evict a resident session
            if self.parked and not parked:
                return _PARK
            room = min(room + self.headroom, kv.capacity)
        if m:
            kv.acquire(ids[:m], session)
        if not kv.make_room(room, spare):
            if m:
                kv.release(ids[:m], session)
            return _PARK if spare else _NO_ROOM
        self.queued_tokens -= ctx
        kv.charge(need)
        if prefilled:  # room is allocated: the KV crosses now (the prefill worker's copy is held until it has)
            self.sim.pull_kv(req, self, m)
        req.kv_charge = need
        req.units_ref = ids[:m]
        if prefilled:
            req.decode_start_s = self.engine.now
            self.loading += 1
            return _ADMITTED
        cached = (m + r) * unit
        if req.preemptions == 0 and req.generated == 0:
            req.cached_tokens = cached
            kv.hits_tokens += cached
        req.prefill_ctx = cached
        req.prefill_left = ctx - cached
        self.queued_tokens += req.prefill_left
        if r:
            req.reloaded_tokens += r * unit
            self.loading += 1
            self.engine.schedule(kv.tier.fetch(ids[m:m + r]), EventKind.TRANSFER_DONE, self._on_reloaded, req)
        else:
            self.prefilling.append(req)
        return _ADMITTED

    def _reload_pays(self, cached: int, tokens: int) -> bool:
        """Reload `tokens` of KV after `cached` ones from the tier only if that beats prefilling them again
        (bytes / bandwidth + latency against the prefill of those tokens in budget-sized chunks)."""
        link = self.kv.tier.link_in
        reload_s = (self.kvb(cached + tokens) - self.kvb(cached)) / link.bandwidth_Bps + link.latency_s
        chunk = min(tokens, self.budget)
        try:
            one = self.model.prefill(PrefillChunk(tokens=chunk, context=_bucket(cached + tokens / 2),
                                                  sequences=1)).latency_s
        except DoesNotFit:
            return True
        return reload_s < one * (tokens / chunk)

    def room_for_newcomer(self, req: Request) -> bool:
        """Whether `hold` would admit `req` here now, nothing of it being resident (no queue, KV to spare)."""
        if self.waiting or self.parked:
            return False
        need = min(self.kvb(req.isl + 1) + self.headroom, self.kv.capacity)
        return self.kv.free_total(spare_sessions=self.hold) >= need

    def _on_reloaded(self, req: Request) -> None:
        """The offload tier's copy of a session's KV is back: it is cached again, the rest is prefilled."""
        self.loading -= 1
        self._cache_units(req, req.prefill_ctx, referenced=True)
        self.prefilling.append(req)
        if not self.busy:
            self.plan()
        elif self.run_chunks is None and self.run_k > 1:
            self._cut_run()


def _bucket(ctx: float) -> int:
    from lpxsim.serving.worker import ctx_bucket  # the worker's cost buckets (imported late: it imports us)

    return ctx_bucket(ctx)
