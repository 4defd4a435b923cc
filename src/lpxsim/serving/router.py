"""Dynamo-like router: request classes to pools, then a worker by KV-aware cost (or RR / least-load).

KV policy (ai-dynamo/dynamo router_design.md, as in shared reference peers.md §6):
    cost(w) = overlap_weight x prefill_blocks(w) + decode_blocks(w), lowest wins;
    prefill_blocks = (ISL - prefix tokens cached on w) / block_size,
    decode_blocks  = KV blocks w holds or has queued.
Temperature 0 takes the argmin (ties to the lowest index); temperature T > 0 samples
a worker with probability softmax(-cost / T). A session keeps landing on the
worker that holds its prefix as long as that worker's cost is lowest.
"""

from __future__ import annotations

import math

import numpy as np

from lpxsim.serving.request import Request
from lpxsim.serving.worker import Worker


class Router:
    """Chooses a worker for a request among a pool's workers."""

    def __init__(self, policy: str, overlap_weight: float, temperature: float, block_tokens: int,
                 rng: np.random.Generator) -> None:
        self.policy = policy
        self.w = overlap_weight
        self.temperature = temperature
        self.block = block_tokens
        self.rng = rng
        self._rr: dict[int, int] = {}

    def pick(self, req: Request, workers: list[Worker], use_prefix: bool = True) -> Worker:
        if len(workers) == 1:
            return workers[0]
        policy = self.policy
        if policy == "round_robin":
            key = id(workers)
            i = self._rr.get(key, 0)
            self._rr[key] = i + 1
            return workers[i % len(workers)]
        if policy == "least_load":
            return min(workers, key=lambda w: (w.load(), w.active_tokens(), w.index))  # ties: lowest index
        if policy == "random":
            return workers[int(self.rng.integers(len(workers)))]
        return self._kv_pick(req, workers, use_prefix)

    def _kv_pick(self, req: Request, workers: list[Worker], use_prefix: bool) -> Worker:
        block, wgt = self.block, self.w
        isl = req.isl
        ids = req.unit_ids(isl) if use_prefix else ()
        unit = req.hash_block_tokens
        costs = []
        best, best_cost = None, float("inf")
        for w in workers:
            cached = w.kv.match(ids) * unit if ids else 0
            cost = (wgt * max(0, isl - cached) + w.ctx_sum + w.queued_tokens) / block
            costs.append(cost)
            if cost < best_cost:  # strict: ties go to the lowest index
                best, best_cost = w, cost
        if self.temperature <= 0:
            return best
        lo = min(costs)
        weights = [math.exp(-(c - lo) / self.temperature) for c in costs]
        total = sum(weights)
        r = self.rng.random() * total
        acc = 0.0
        for w, x in zip(workers, weights, strict=True):
            acc += x
            if r < acc:
                return w
        return workers[-1]
