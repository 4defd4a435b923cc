"""KV memory of one worker: byte accounting with a prefix cache of hashed units and LRU eviction.

Memory is counted in bytes, not block objects, so admission costs O(1): a
sequence holds the KV bytes of its context rounded up to whole blocks
(`Worker.kvb`). Shared prefixes are cached in units named by hash ids (512
tokens in the Mooncake traces); the bytes of units [0, n) are the KV bytes of
n*U tokens, so a request that reuses m units holds only the rest privately.
A cached unit is pinned while a running request references it and evictable
(least recently used first) once none does. `used` counts private bytes of
running sequences plus every cached unit; `used <= capacity` always holds.
"""

from __future__ import annotations

from collections import OrderedDict


class KvStore:
    """Byte-accounted KV pool with a hashed-prefix cache (refcounts + LRU of unreferenced units)."""

    __slots__ = ("capacity", "used", "units", "lru", "evictable", "peak", "hits_tokens", "evictions", "holders",
                 "bit")

    def __init__(self, capacity_bytes: float) -> None:
        self.capacity = float(capacity_bytes)
        self.used = 0.0
        self.units: dict[int, list] = {}  # id -> [refcount, bytes]
        self.lru: OrderedDict[int, None] = OrderedDict()  # unreferenced units, oldest first
        self.evictable = 0.0
        self.peak = 0.0
        self.hits_tokens = 0
        self.evictions = 0
        # A KV-aware router's index (unit id -> bitmask of the workers holding it) and this store's bit in it
        self.holders: dict[int, int] | None = None
        self.bit = 0

    def track(self, holders: dict[int, int], bit: int) -> None:
        """Report every resident unit, now and from now on, in the router's index `holders` under `bit`."""
        self.holders, self.bit = holders, bit
        for h in self.units:
            holders[h] = holders.get(h, 0) | bit

    def match(self, ids: tuple[int, ...]) -> int:
        """Number of leading units of `ids` resident here (no side effects)."""
        units = self.units
        n = 0
        for h in ids:
            if h not in units:
                break
            n += 1
        return n

    def acquire(self, ids: tuple[int, ...]) -> None:
        """Reference resident units (pins them against eviction)."""
        for h in ids:
            u = self.units[h]
            if u[0] == 0:
                del self.lru[h]
                self.evictable -= u[1]
            u[0] += 1

    def release(self, ids: tuple[int, ...]) -> None:
        """Drop references; units nobody references become evictable, tail units first."""
        for h in reversed(ids):
            u = self.units.get(h)
            if u is None:
                continue
            u[0] -= 1
            if u[0] == 0:
                self.lru[h] = None
                self.evictable += u[1]

    def insert(self, ids: tuple[int, ...], unit_bytes: list[float], referenced: bool) -> float:
        """Turn private KV into cached units. Returns the private bytes handed over (or freed as duplicates)."""
        handed = 0.0
        for h, b in zip(ids, unit_bytes, strict=True):
            handed += b
            u = self.units.get(h)
            if u is not None:  # someone cached it meanwhile: our copy is a duplicate, free it
                self.used -= b
                if referenced:
                    if u[0] == 0:
                        del self.lru[h]
                        self.evictable -= u[1]
                    u[0] += 1
                continue
            self.units[h] = [1 if referenced else 0, b]
            if self.holders is not None:
                self.holders[h] = self.holders.get(h, 0) | self.bit
            if not referenced:
                self.lru[h] = None
                self.evictable += b
        return handed

    def free_total(self) -> float:
        """Bytes obtainable now: free space plus everything evictable."""
        return self.capacity - self.used + self.evictable

    def make_room(self, nbytes: float) -> bool:
        """Evict LRU units until `nbytes` are free. False (and nothing evicted) if impossible."""
        if self.capacity - self.used >= nbytes:
            return True
        if self.free_total() < nbytes:
            return False
        lru, units = self.lru, self.units
        while self.capacity - self.used < nbytes and lru:
            h, _ = lru.popitem(last=False)
            b = units.pop(h)[1]
            if self.holders is not None:
                rest = self.holders[h] & ~self.bit
                if rest:
                    self.holders[h] = rest
                else:
                    del self.holders[h]
            self.evictable -= b
            self.used -= b
            self.evictions += 1
        return self.capacity - self.used >= nbytes

    def charge(self, nbytes: float) -> None:
        self.used += nbytes
        if self.used > self.peak:
            self.peak = self.used

    def free(self, nbytes: float) -> None:
        self.used -= nbytes
