"""KV memory of one worker: byte accounting with a prefix cache of hashed units, session retention, offload.

Memory is counted in bytes, not block objects, so admission costs O(1): a
sequence holds the KV bytes of its context rounded up to whole blocks
(`Worker.kvb`). Shared prefixes are cached in units named by hash ids (512
tokens in the Mooncake traces; an append-only chain per agentic session); the
bytes of units [0, n) are the KV bytes of n*U tokens, so a request that reuses
m units holds only the rest privately. A cached unit is pinned while a running
request references it and evictable once none does. `used` counts private bytes
of running sequences plus every cached unit; `used <= capacity` always holds.

Retention (docs/serving.md "Retention"): with `session_whole`, the units a
session's finished turn leaves behind form one entry in a session LRU, and
eviction takes the longest-idle entry whole (a loose unit, or a whole idle
session, whichever was released first); without it every unit is its own LRU
entry (plain block LRU, tail units first). `make_room(..., spare_sessions=True)`
evicts only loose units: the `hold` policy's admission of a session that has
nothing resident. Evicted units go to the worker's offload tier when it has one.
"""

from __future__ import annotations

from collections import OrderedDict


class ResidentCount:
    """Sessions with KV resident in a pool, now and at most (shared by the pool's stores)."""

    __slots__ = ("n", "max")

    def __init__(self) -> None:
        self.n = 0
        self.max = 0

    def add(self, d: int) -> None:
        self.n += d
        if self.n > self.max:
            self.max = self.n


class TierStore:
    """An offload tier of one worker: LRU of units by bytes, reached over a full-duplex link (two FIFO
    `spec.Link`s: write-backs out, reloads in, so a reload never waits behind an eviction's write).

    Inclusive: a reloaded unit keeps its copy here, so evicting it again writes nothing."""

    __slots__ = ("name", "capacity", "used", "units", "link_out", "link_in", "clock", "reloads", "reload_bytes",
                 "write_bytes")

    def __init__(self, name: str, capacity_bytes: float, link_out, link_in, clock) -> None:
        self.name = name
        self.capacity = float(capacity_bytes)
        self.used = 0.0
        self.units: OrderedDict[int, float] = OrderedDict()
        self.link_out, self.link_in = link_out, link_in
        self.clock = clock  # () -> simulated now
        self.reloads = 0
        self.reload_bytes = 0.0
        self.write_bytes = 0.0

    def run(self, ids: tuple[int, ...], start: int) -> int:
        """How many units of `ids` from index `start` on are held here, consecutively."""
        units = self.units
        n = start
        while n < len(ids) and ids[n] in units:
            n += 1
        return n - start

    def put(self, h: int, nbytes: float) -> None:
        """Write an evicted unit back (the oldest units here make room)."""
        units = self.units
        if h in units:
            units.move_to_end(h)
            return
        if nbytes > self.capacity:
            return
        while self.used + nbytes > self.capacity:
            self.used -= units.popitem(last=False)[1]
        units[h] = nbytes
        self.used += nbytes
        self.write_bytes += nbytes
        self.link_out.transfer(self.clock(), nbytes)

    def fetch(self, ids: tuple[int, ...]) -> float:
        """Reload `ids` (all held here); returns when the last byte has arrived."""
        units = self.units
        nbytes = 0.0
        for h in ids:
            units.move_to_end(h)
            nbytes += units[h]
        self.reloads += 1
        self.reload_bytes += nbytes
        return self.link_in.transfer(self.clock(), nbytes)


class KvStore:
    """Byte-accounted KV pool with a hashed-prefix cache (refcounts, block or session LRU, optional tier)."""

    __slots__ = ("capacity", "used", "units", "lru", "idle", "evictable", "evictable_loose", "peak", "hits_tokens",
                 "evictions", "evicted_bytes", "holders", "bit", "session_whole", "tier", "resident", "sess_units",
                 "_stamp")

    def __init__(self, capacity_bytes: float, session_whole: bool = False, tier: TierStore | None = None,
                 resident: ResidentCount | None = None) -> None:
        self.capacity = float(capacity_bytes)
        self.used = 0.0
        self.units: dict[int, list] = {}  # id -> [refcount, bytes, session (-1: none)]
        self.lru: OrderedDict[int, int] = OrderedDict()  # loose unreferenced units -> release stamp, oldest first
        self.idle: OrderedDict[int, list] = OrderedDict()  # session -> [stamp, its unreferenced units, head unit]
        self.evictable = 0.0
        self.evictable_loose = 0.0
        self.peak = 0.0
        self.hits_tokens = 0
        self.evictions = 0  # eviction events: a loose unit, or a whole idle session
        self.evicted_bytes = 0.0
        # A KV-aware router's index (unit id -> bitmask of the workers holding it) and this store's bit in it
        self.holders: dict[int, int] | None = None
        self.bit = 0
        self.session_whole = session_whole
        self.tier = tier
        self.resident = resident if resident is not None else ResidentCount()
        self.sess_units: dict[int, int] = {}  # session -> units resident here
        self._stamp = 0

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

    def acquire(self, ids: tuple[int, ...], session: int = -1) -> None:
        """Reference resident units (pins them against eviction)."""
        if session >= 0 and session in self.idle:
            entry = self.idle[session]
            if len(entry[1]) == len(ids) and entry[2] == ids[0]:  # the session takes back exactly what it left
                del self.idle[session]
                units = self.units
                for h in ids:
                    u = units[h]
                    u[0] += 1
                    self.evictable -= u[1]
                return
            self._loosen(session, stale=True)
        for h in ids:
            u = self.units[h]
            if u[0] == 0:
                del self.lru[h]
                self.evictable_loose -= u[1]
                self.evictable -= u[1]
            u[0] += 1

    def _loosen(self, session: int, stale: bool) -> None:
        """Turn an idle session's entry into loose units (at the cold end when `stale`)."""
        ids = self.idle.pop(session)[1]
        lru, units = self.lru, self.units
        for h in ids:
            u = units.get(h)
            if u is None or u[0] or h in lru:
                continue
            lru[h] = 0
            if stale:
                lru.move_to_end(h, last=False)
            self.evictable_loose += u[1]

    def release(self, ids: tuple[int, ...], session: int = -1) -> None:
        """Drop references; units nobody references become evictable (tail units first, or as one session)."""
        self._stamp += 1
        whole = self.session_whole and session >= 0
        freed = []
        for h in reversed(ids):
            u = self.units.get(h)
            if u is None:
                continue
            u[0] -= 1
            if u[0] == 0:
                self.evictable += u[1]
                if whole:
                    freed.append(h)
                else:
                    self.lru[h] = self._stamp
                    self.evictable_loose += u[1]
        if freed:  # [stamp, units, the head unit]; `freed` is tail first
            entry = self.idle.pop(session, None)
            self.idle[session] = ([self._stamp, freed + entry[1], -1] if entry else [self._stamp, freed, freed[-1]])

    def insert(self, ids: tuple[int, ...], unit_bytes: list[float], referenced: bool, session: int = -1) -> float:
        """Turn private KV into cached units. Returns the private bytes handed over (or freed as duplicates)."""
        handed = 0.0
        for h, b in zip(ids, unit_bytes, strict=True):
            handed += b
            u = self.units.get(h)
            if u is not None:  # someone cached it meanwhile: our copy is a duplicate, free it
                self.used -= b
                if referenced:
                    if u[0] == 0:
                        if h in self.lru:
                            del self.lru[h]
                            self.evictable_loose -= u[1]
                        self.evictable -= u[1]
                    u[0] += 1
                continue
            self.units[h] = [1 if referenced else 0, b, session]
            if session >= 0:
                c = self.sess_units.get(session, 0)
                if c == 0:
                    self.resident.add(1)
                self.sess_units[session] = c + 1
            if self.holders is not None:
                self.holders[h] = self.holders.get(h, 0) | self.bit
            if not referenced:
                self.lru[h] = self._stamp
                self.evictable += b
                self.evictable_loose += b
        return handed

    def close_session(self, session: int, ids: tuple[int, ...]) -> None:
        """The session has ended: its units (`ids`, the last chain) are no longer a held session's."""
        if session in self.idle:
            self._loosen(session, stale=True)
        units = self.units
        for h in ids:
            u = units.get(h)
            if u is not None and u[2] == session:
                u[2] = -1
        if self.sess_units.pop(session, 0):
            self.resident.add(-1)

    def free_total(self, spare_sessions: bool = False) -> float:
        """Bytes obtainable now: free space plus everything evictable (only loose units if `spare_sessions`)."""
        return self.capacity - self.used + (self.evictable_loose if spare_sessions else self.evictable)

    def make_room(self, nbytes: float, spare_sessions: bool = False) -> bool:
        """Evict the coldest entries until `nbytes` are free. False (and nothing evicted) if impossible."""
        if self.capacity - self.used >= nbytes:
            return True
        if self.free_total(spare_sessions) < nbytes:
            return False
        lru, idle = self.lru, self.idle
        while self.capacity - self.used < nbytes:
            if idle and not spare_sessions and (not lru or next(iter(idle.values()))[0] < next(iter(lru.values()))):
                ids = idle.popitem(last=False)[1][1]
                for h in ids:
                    if self.units.get(h, (1,))[0] == 0:
                        self._evict(h)
            elif lru:
                h, _ = lru.popitem(last=False)
                self.evictable_loose -= self.units[h][1]
                self._evict(h)
            else:
                break
            self.evictions += 1
        return self.capacity - self.used >= nbytes

    def _evict(self, h: int) -> None:
        _, b, session = self.units.pop(h)
        if self.holders is not None:
            rest = self.holders[h] & ~self.bit
            if rest:
                self.holders[h] = rest
            else:
                del self.holders[h]
        if session >= 0:
            c = self.sess_units.get(session)
            if c is not None:
                if c <= 1:
                    del self.sess_units[session]
                    self.resident.add(-1)
                else:
                    self.sess_units[session] = c - 1
        self.evictable -= b
        self.used -= b
        self.evicted_bytes += b
        if self.tier is not None:
            self.tier.put(h, b)

    def charge(self, nbytes: float) -> None:
        self.used += nbytes
        if self.used > self.peak:
            self.peak = self.used

    def free(self, nbytes: float) -> None:
        self.used -= nbytes
