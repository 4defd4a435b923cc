"""Dynamo-like router: request classes to pools, then a worker by KV-aware cost (or RR / least-load).

KV policy (ai-dynamo/dynamo router_design.md, as in shared reference peers.md §6):
    cost(w) = overlap_weight x prefill_blocks(w) + decode_blocks(w), lowest wins;
    prefill_blocks = (ISL - prefix tokens cached on w) / block_size,
    decode_blocks  = KV blocks w holds or has queued.
Temperature 0 takes the argmin (ties to the lowest index); temperature T > 0 samples
a worker with probability softmax(-cost / T). A session keeps landing on the
worker that holds its prefix as long as that worker's cost is lowest.

Speed: the router keeps a board of every worker's load in numpy arrays (workers
write to it as their load changes) and an index from each prefix unit to the
bitmask of the workers holding it. One pick walks the request's units once
(bitmask ANDs: O(units), not O(workers)), turns the few distinct holder sets
into a match count per worker, and takes the argmin of the cost vector in numpy:
the Python work per arrival no longer grows with the number of workers.
"""

from __future__ import annotations

import math

import numpy as np

from lpxsim.serving.request import Request
from lpxsim.serving.worker import Worker


class Board:
    """Loads and resident prefix units of the workers a router tracks (a worker's `track` fills its slot)."""

    def __init__(self) -> None:
        self.ctx = np.zeros(16)
        self.queued = np.zeros(16)
        self.holders: dict[int, int] = {}  # loose prefix unit id -> bitmask of slots holding it
        self.chains: dict[int, dict[int, int]] = {}  # session chain base -> {slot: leading units it holds}
        self.size = 0

    def add(self, worker) -> int:
        """A slot for `worker` (growing the arrays as needed); the worker publishes into it."""
        slot = self.size
        if slot == len(self.ctx):
            self.ctx = np.concatenate([self.ctx, np.zeros(slot)])
            self.queued = np.concatenate([self.queued, np.zeros(slot)])
        self.size += 1
        worker.track(self, slot)
        return slot

    def matches(self, ids: tuple[int, ...]) -> np.ndarray | None:
        """Leading units of `ids` each slot holds (None: no slot holds the first), as an int array."""
        holders = self.holders
        cur = holders.get(ids[0], 0)
        if not cur:
            return None
        runs: list[tuple[int, int]] = []  # (holder set, levels it lasted); the sets shrink along the prefix
        count = 1
        for i in range(1, len(ids)):
            nxt = cur & holders.get(ids[i], 0)
            if nxt == cur:
                count += 1
                continue
            runs.append((cur, count))
            if not nxt:
                cur = 0
                break
            cur, count = nxt, 1
        if cur:
            runs.append((cur, count))
        return self._counts(runs)

    def chain_matches(self, ids: range) -> np.ndarray | None:
        """`matches` for a session's chain (`ids` starts at its base). A worker holds a prefix of a chain
        (units join at its tail and leave tail first or all at once), so the stores publish each chain as its
        unit count per slot: O(holders), not O(units)."""
        held = self.chains.get(ids.start)
        if not held:
            return None
        n = len(ids)
        m = np.zeros(self.size, dtype=np.int64)
        for slot, k in held.items():
            m[slot] = k if k < n else n
        return m

    def _counts(self, runs: list[tuple[int, int]]) -> np.ndarray:
        nbytes = (self.size + 7) // 8
        m = np.zeros(self.size, dtype=np.int64)
        for mask, n in runs:
            bits = np.unpackbits(np.frombuffer(mask.to_bytes(nbytes, "little"), dtype=np.uint8),
                                 bitorder="little", count=self.size)
            m += n * bits.astype(np.int64)
        return m


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
        self._board = Board()
        self._views: dict[int, tuple[list[Worker], np.ndarray | None]] = {}

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

    def _slots(self, workers: list[Worker]) -> np.ndarray | None:
        """The board slots of `workers` (tracked on first sight); None if one of them cannot be tracked."""
        hit = self._views.get(id(workers))
        if hit is not None and hit[0] is workers:
            return hit[1]
        slots = None
        if all(hasattr(w, "track") for w in workers):
            board = self._board
            slots = np.array([w._slot if w._board is board else board.add(w) for w in workers], dtype=np.int64)
        self._views[id(workers)] = (workers, slots)  # holding the list keeps its id from being reused
        return slots

    def _kv_pick(self, req: Request, workers: list[Worker], use_prefix: bool) -> Worker:
        slots = self._slots(workers)
        if slots is None:
            return self._kv_pick_loop(req, workers, use_prefix)
        board, isl = self._board, req.isl
        ids = req.unit_ids(isl) if use_prefix else ()
        m = (board.chain_matches(ids) if isinstance(ids, range) else board.matches(ids)) if ids else None
        if m is None:
            pre = self.w * max(0, isl)
        else:
            pre = self.w * np.maximum(0, isl - m[slots] * req.hash_block_tokens)
        costs = ((pre + board.ctx[slots]) + board.queued[slots]) / self.block  # same float steps as the loop
        if self.temperature <= 0:
            return workers[int(np.argmin(costs))]  # first minimum: ties go to the lowest index
        acc = np.cumsum(np.exp(-(costs - costs.min()) / self.temperature))
        i = int(np.searchsorted(acc, self.rng.random() * acc[-1], side="right"))
        return workers[min(i, len(workers) - 1)]

    def _kv_pick_loop(self, req: Request, workers: list[Worker], use_prefix: bool) -> Worker:
        """The same choice by a loop over the workers (workers that cannot publish to a board)."""
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
