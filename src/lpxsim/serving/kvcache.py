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
    """Byte-accounted KV pool: a hashed-prefix cache of loose units (refcounts, LRU) and session chains.

    A session's units are one chain of consecutive ids (`Request.unit_ids` gives a `range`); a worker
    always holds a prefix of a chain, so a chain is kept as (units resident, references, bytes, unit sizes)
    and its match, pin and release cost O(1) instead of O(units). Its units are not entries of `units`
    (loose units only): the router's index sees a chain as its unit count per worker (`track`), and only
    the offload tier sees its units one by one. Idle chains wait in `idle` (held sessions) or `cold`
    (sessions that ended, or copies a moved session left behind: evicted first, and open to `hold`'s
    newcomers)."""

    __slots__ = ("capacity", "used", "units", "lru", "chains", "idle", "cold", "evictable", "evictable_loose",
                 "peak", "hits_tokens", "evictions", "evicted_bytes", "holders", "bit", "chain_index", "slot",
                 "session_whole", "tier", "resident", "by_session", "_stamp")

    def __init__(self, capacity_bytes: float, session_whole: bool = False, tier: TierStore | None = None,
                 resident: ResidentCount | None = None) -> None:
        self.capacity = float(capacity_bytes)
        self.used = 0.0
        self.units: dict[int, list] = {}  # loose unit id -> [refcount, bytes, -1]
        self.lru: OrderedDict[int, int] = OrderedDict()  # loose unreferenced units -> release stamp, oldest first
        # chain base -> [units resident, references, bytes, session (-1: none held), unit sizes]
        self.chains: dict[int, list] = {}
        self.idle: OrderedDict[int, int] = OrderedDict()  # unreferenced chains of held sessions -> release stamp
        self.cold: OrderedDict[int, int] = OrderedDict()  # unreferenced chains no session holds
        self.evictable = 0.0
        self.evictable_loose = 0.0  # what `hold` lets a newcomer evict: loose units and cold chains
        self.peak = 0.0
        self.hits_tokens = 0
        self.evictions = 0  # eviction events: a loose unit, a whole idle session, or (block LRU) a chain's unit
        self.evicted_bytes = 0.0
        # A KV-aware router's index (unit id -> bitmask of the workers holding it) and this store's bit in it
        self.holders: dict[int, int] | None = None
        self.bit = 0
        # ... and its chain index (chain base -> {slot: units of the chain resident there}) and this store's slot
        self.chain_index: dict[int, dict[int, int]] | None = None
        self.slot = -1
        self.session_whole = session_whole
        self.tier = tier
        self.resident = resident if resident is not None else ResidentCount()
        self.by_session: dict[int, int] = {}  # held session -> the base of its chain here
        self._stamp = 0

    def track(self, holders: dict[int, int], bit: int, chain_index: dict[int, dict[int, int]] | None = None,
              slot: int = -1) -> None:
        """Report every resident loose unit, now and from now on, in the router's index `holders` under `bit`,
        and every chain's resident unit count in `chain_index` under `slot`."""
        self.holders, self.bit = holders, bit
        for h in self.units:
            holders[h] = holders.get(h, 0) | bit
        if chain_index is not None:
            self.chain_index, self.slot = chain_index, slot
            for base, c in self.chains.items():
                chain_index.setdefault(base, {})[slot] = c[0]

    def holds(self, h: int) -> bool:
        """Whether unit `h` (a loose unit, or the first unit of a chain) is resident here."""
        return h in self.units or h in self.chains

    def unit_count(self) -> int:
        """Prefix units resident here (loose units and the units of every chain)."""
        return len(self.units) + sum(c[0] for c in self.chains.values())

    def match(self, ids) -> int:
        """Number of leading units of `ids` resident here (no side effects)."""
        if type(ids) is range:
            c = self.chains.get(ids.start)
            return min(c[0], len(ids)) if c is not None else 0
        units = self.units
        n = 0
        for h in ids:
            if h not in units:
                break
            n += 1
        return n

    def acquire(self, ids, session: int = -1) -> None:
        """Reference resident units (pins them against eviction; a chain is pinned whole)."""
        if type(ids) is range:
            if len(ids):
                self._ref_chain(self.chains[ids.start])
            return
        for h in ids:
            u = self.units[h]
            if u[0] == 0:
                del self.lru[h]
                self.evictable_loose -= u[1]
                self.evictable -= u[1]
            u[0] += 1

    def _ref_chain(self, c: list) -> None:
        if c[1] == 0:
            base = c[5]
            if base in self.idle:
                del self.idle[base]
            else:
                del self.cold[base]
                self.evictable_loose -= c[2]
            self.evictable -= c[2]
        c[1] += 1

    def release(self, ids, session: int = -1) -> None:
        """Drop references; what nobody references becomes evictable."""
        self._stamp += 1
        if type(ids) is range:
            if len(ids):
                c = self.chains.get(ids.start)
                if c is not None:
                    c[1] -= 1
                    if c[1] == 0:
                        self._park(c)
            return
        for h in reversed(ids):
            u = self.units.get(h)
            if u is None:
                continue
            u[0] -= 1
            if u[0] == 0:
                self.evictable += u[1]
                self.lru[h] = self._stamp
                self.evictable_loose += u[1]

    def _park(self, c: list) -> None:
        """An unreferenced chain waits to be taken back (idle) or evicted (cold)."""
        self.evictable += c[2]
        if c[3] >= 0:
            self.idle[c[5]] = self._stamp
        else:
            self.cold[c[5]] = self._stamp
            self.evictable_loose += c[2]

    def insert(self, ids, unit_bytes: list[float], referenced: bool, session: int = -1,
               chain: int | None = None) -> float:
        """Turn private KV into cached units. Returns the private bytes handed over (or freed as duplicates).
        A `range` of ids is the continuation of chain `chain` (its base id) from what the caller holds."""
        if type(ids) is range:
            return self._extend_chain(chain if chain is not None else ids.start, ids, unit_bytes, referenced,
                                      session)
        handed = 0.0
        for h, b in zip(ids, unit_bytes, strict=True):
            handed += b
            u = self.units.get(h)
            if u is not None:  # someone cached it meanwhile: our copy is a duplicate, free it
                self.used -= b
                if referenced:
                    if u[0] == 0:
                        del self.lru[h]
                        self.evictable_loose -= u[1]
                        self.evictable -= u[1]
                    u[0] += 1
                continue
            self.units[h] = [1 if referenced else 0, b, -1]
            if self.holders is not None:
                self.holders[h] = self.holders.get(h, 0) | self.bit
            if not referenced:
                self.lru[h] = self._stamp
                self.evictable += b
                self.evictable_loose += b
        return handed

    def _extend_chain(self, base: int, ids: range, unit_bytes: list[float], referenced: bool, session: int) -> float:
        handed = 0.0
        c = self.chains.get(base)
        if c is None:
            if session >= 0:  # a session starting a new chain (truncated): its old chain is no held session's
                old = self.by_session.get(session)
                if old is not None:
                    self.close_session(session, range(old, old + 1))
                self.by_session[session] = base
                self.resident.add(1)
            c = self.chains[base] = [0, 0, 0.0, session, [], base]
            fresh = True
        else:
            fresh = False
        first = ids.start - base  # index in the chain of the first unit handed over
        if len(unit_bytes) != len(ids):
            raise ValueError("one size per unit")
        dup = min(max(0, c[0] - first), len(ids))  # already resident (another copy of this turn cached them)
        for b in unit_bytes[:dup]:  # ours are duplicates
            handed += b
            self.used -= b
        new = unit_bytes[dup:]
        if new:
            total = c[2]
            for b in new:  # one float at a time, in unit order (the sums stay bit for bit what they were)
                handed += b
                total += b
            c[4].extend(new)
            c[0] += len(new)
            c[2] = total
            if self.chain_index is not None:
                held = self.chain_index.get(base)
                if held is None:
                    held = self.chain_index[base] = {}
                held[self.slot] = c[0]
            if c[1] == 0 and not fresh:  # an idle chain grows: its new bytes are evictable too
                loose = c[5] in self.cold
                for b in new:
                    self.evictable += b
                    if loose:
                        self.evictable_loose += b
        if referenced and first == 0:  # the caller held nothing of the chain: it takes its reference now
            if fresh:
                c[1] = 1
            else:
                self._ref_chain(c)
        elif fresh:
            self._park(c)
        return handed

    def retire_stale(self, session: int, base: int) -> None:
        """A turn of `session` arrives on chain `base`: a different chain the session holds here is stale (the
        agent truncated, and the kept tokens' KV depended on what it dropped), so it is no held session's from
        now on. Done on arrival, not when the new chain is first cached: under `hold` the new turn has nothing
        resident and may not evict a held chain, so waiting for the insert could leave every session parked
        behind its own stale KV."""
        old = self.by_session.get(session)
        if old is not None and old != base:
            self.close_session(session, range(old, old + 1))

    def close_session(self, session: int, ids) -> None:
        """The session has ended here (its last turn, or it moved on): its chain is no held session's now."""
        if type(ids) is not range:
            return
        c = self.chains.get(ids.start)
        if c is None or c[3] < 0:
            return
        c[3] = -1
        self.resident.add(-1)
        base = c[5]
        if self.by_session.get(session) == base:
            del self.by_session[session]
        if base in self.idle:  # waiting idle: to the cold end, open to newcomers
            del self.idle[base]
            self.cold[base] = 0
            self.cold.move_to_end(base, last=False)
            self.evictable_loose += c[2]

    def free_total(self, spare_sessions: bool = False) -> float:
        """Bytes obtainable now: free space plus everything evictable (not held sessions' if `spare_sessions`)."""
        return self.capacity - self.used + (self.evictable_loose if spare_sessions else self.evictable)

    def make_room(self, nbytes: float, spare_sessions: bool = False) -> bool:
        """Evict the coldest entries until `nbytes` are free. False (and nothing evicted) if impossible.

        Order: chains no session holds, then whichever of a loose unit and an idle session's chain was
        released first. A chain goes whole (`session_whole`) or tail unit first (block LRU)."""
        if self.capacity - self.used >= nbytes:
            return True
        if self.free_total(spare_sessions) < nbytes:
            return False
        lru, idle, cold = self.lru, self.idle, self.cold
        while self.capacity - self.used < nbytes:
            if cold:
                self._evict_from_chain(next(iter(cold)), cold, True)
            elif idle and not spare_sessions and (not lru or next(iter(idle.values())) < next(iter(lru.values()))):
                self._evict_from_chain(next(iter(idle)), idle, False)
            elif lru:
                h, _ = lru.popitem(last=False)
                b = self.units[h][1]
                self.evictable_loose -= b
                self.evictable -= b
                self._drop(h, b)
            else:
                break
            self.evictions += 1
        return self.capacity - self.used >= nbytes

    def _evict_from_chain(self, base: int, queue: OrderedDict, loose: bool) -> None:
        """Evict a whole idle chain, or (block LRU) only its tail unit."""
        c = self.chains[base]
        k = c[0] if self.session_whole or loose else 1
        sizes = c[4]
        tier = self.tier
        for _ in range(k):  # unit by unit, tail first: the same float steps as evicting them one at a time
            c[0] -= 1
            b = sizes.pop()
            c[2] -= b
            self.evictable -= b
            if loose:
                self.evictable_loose -= b
            self.used -= b
            self.evicted_bytes += b
            if tier is not None:
                tier.put(base + c[0], b)
        index = self.chain_index
        if index is not None:
            held = index[base]
            if c[0]:
                held[self.slot] = c[0]
            else:
                del held[self.slot]
                if not held:
                    del index[base]
        if c[0] == 0:
            del queue[base]
            del self.chains[base]
            if c[3] >= 0:
                self.resident.add(-1)
                if self.by_session.get(c[3]) == base:
                    del self.by_session[c[3]]

    def _drop(self, h: int, b: float) -> None:
        """Evict loose unit `h` of `b` bytes."""
        self.units.pop(h)
        if self.holders is not None:
            rest = self.holders[h] & ~self.bit
            if rest:
                self.holders[h] = rest
            else:
                del self.holders[h]
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
