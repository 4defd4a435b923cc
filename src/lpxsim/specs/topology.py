"""Chip-level wiring of a system: which link joins two chips, neighbours, hop counts and routes.

Chips are numbered globally: ``chip = (rack * nodes_per_rack + node) * chips_per_node + index``.
"rack" is one unit of the system (an LPX rack, a GroqRack, an NVL72 rack, an HGX node).

Rules per topology kind (roles are the keys of ``Topology.links``):

- ``lpx-nodes`` (LPX 16x16, trays 32x8): ``intra_node`` joins every pair in a node;
  ``inter_node`` joins chip i of node n to chip i of every other node of the rack (same-index
  "rail" partner, an assumption); ``inter_rack`` joins chip (r, n, i) to (r +/- 1, n, i): racks are
  daisy-chained per node index, not closed into a ring. The rack graph is the Cartesian product of
  a chain of racks and one rack, so hop counts add: <= 2 inside a rack, + |r1 - r2| across racks.
  The ``fpga`` link goes to a bridge, not to a chip, and is not part of the chip graph.
- ``nvlink-domain`` / ``hgx`` / ``wafer``: every pair in a node is one ``scale_up`` hop (through NVSwitch, or a
  direct xGMI link on AMD meshes); chips in different nodes are one ``scale_out`` hop.
- ``dragonfly`` (Groq TSP v1): ``intra_node`` all-to-all; ``inter_node`` pairs chip i of node n with
  chip 7-i of node (n+i+1) mod (nodes+1) (the spare 9th node completes the map and is unused);
  ``inter_rack`` joins chip t of rack r to chip t of racks r +/- ((t mod (R-1)) + 1) mod R. The port
  map is an assumption (docs/assumptions.md); hop counts come from breadth-first search.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from functools import cached_property

from lpxsim.core.errors import UserError
from lpxsim.specs.hardware import LinkClass, Topology

# Kinds whose chips in a node are all one scale_up hop apart (switch, full mesh, or wafers on direct links).
_SWITCHED = ("nvlink-domain", "hgx", "wafer")


@dataclass(frozen=True)
class ChipAddr:
    """Where a chip sits: unit (rack), node within the rack, index within the node."""

    rack: int
    node: int
    index: int


@dataclass
class ChipGraph:
    """The chips of `racks` units of a topology and the links between them."""

    topology: Topology
    racks: int = 1
    _bfs_cache: dict[int, dict[int, int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.racks < 1:
            raise UserError("racks", f"need at least 1 rack, got {self.racks}")
        if self.racks > 1 and self.topology.kind == "lpx-nodes" and "inter_rack" not in self.topology.links:
            raise UserError("racks", "this topology has no inter_rack links")

    # ---- numbering
    @property
    def chips_per_rack(self) -> int:
        return self.topology.chips_per_node * self.topology.nodes_per_rack

    @property
    def n_chips(self) -> int:
        return self.chips_per_rack * self.racks

    def address(self, chip: int) -> ChipAddr:
        """The (rack, node, index) of a global chip id."""
        self._check(chip)
        cpn = self.topology.chips_per_node
        rack, rest = divmod(chip, self.chips_per_rack)
        node, index = divmod(rest, cpn)
        return ChipAddr(rack, node, index)

    def chip(self, rack: int, node: int, index: int) -> int:
        """The global chip id of (rack, node, index)."""
        t = self.topology
        if not (0 <= rack < self.racks and 0 <= node < t.nodes_per_rack and 0 <= index < t.chips_per_node):
            raise UserError("chip", f"no chip at rack {rack}, node {node}, index {index}")
        return (rack * t.nodes_per_rack + node) * t.chips_per_node + index

    def _check(self, chip: int) -> None:
        if not 0 <= chip < self.n_chips:
            raise UserError("chip", f"chip id {chip} outside 0..{self.n_chips - 1}")

    # ---- links
    def link_role(self, a: int, b: int) -> str | None:
        """The role (key of topology.links) of the direct link between chips a and b, or None."""
        if a == b:
            self._check(a)
            return None
        kind = self.topology.kind
        if kind == "lpx-nodes":  # by arithmetic on the ids, not addresses (a compile asks ~10^4 times)
            self._check(a)
            self._check(b)
            cpn = self.topology.chips_per_node
            ra, in_a = divmod(a, self.chips_per_rack)
            rb, in_b = divmod(b, self.chips_per_rack)
            if ra == rb:
                if in_a // cpn == in_b // cpn:
                    return "intra_node"
                return "inter_node" if in_a % cpn == in_b % cpn else None
            return "inter_rack" if abs(ra - rb) == 1 and in_a == in_b else None
        pa, pb = self.address(a), self.address(b)
        if kind in _SWITCHED:
            same = pa.rack == pb.rack and pa.node == pb.node
            return "scale_up" if same else ("scale_out" if "scale_out" in self.topology.links else None)
        return self._dragonfly_role(pa, pb)

    def link(self, a: int, b: int) -> LinkClass | None:
        """The LinkClass joining chips a and b directly, or None."""
        role = self.link_role(a, b)
        return None if role is None else self.topology.links[role]

    def neighbors(self, chip: int) -> list[tuple[int, str]]:
        """Chips one hop from `chip`, with the role of the link, in ascending chip order."""
        self._check(chip)
        if self.topology.kind == "lpx-nodes":
            out = self._lpx_neighbors(chip)
        elif self.topology.kind == "dragonfly":
            out = self._dragonfly_neighbors(chip)
        else:
            out = [(c, r) for c in range(self.n_chips) if (r := self.link_role(chip, c)) is not None]
        return sorted(out)

    def _lpx_neighbors(self, chip: int) -> list[tuple[int, str]]:
        p = self.address(chip)
        t = self.topology
        out = [(self.chip(p.rack, p.node, i), "intra_node") for i in range(t.chips_per_node) if i != p.index]
        out += [(self.chip(p.rack, n, p.index), "inter_node") for n in range(t.nodes_per_rack) if n != p.node]
        out += [
            (self.chip(r, p.node, p.index), "inter_rack")
            for r in (p.rack - 1, p.rack + 1)
            if 0 <= r < self.racks
        ]
        return out

    def _dragonfly_neighbors(self, chip: int) -> list[tuple[int, str]]:
        p = self.address(chip)
        t = self.topology
        out = [(self.chip(p.rack, p.node, i), "intra_node") for i in range(t.chips_per_node) if i != p.index]
        node = (p.node + p.index + 1) % (t.nodes_per_rack + 1)
        if node < t.nodes_per_rack and "inter_node" in t.links:
            out.append((self.chip(p.rack, node, t.chips_per_node - 1 - p.index), "inter_node"))
        if self.racks > 1 and "inter_rack" in t.links:
            step = (p.node * t.chips_per_node + p.index) % (self.racks - 1) + 1
            for r in sorted({(p.rack + step) % self.racks, (p.rack - step) % self.racks}):
                out.append((self.chip(r, p.node, p.index), "inter_rack"))
        return out

    def _dragonfly_role(self, pa: ChipAddr, pb: ChipAddr) -> str | None:
        t = self.topology
        if pa.rack == pb.rack:
            if pa.node == pb.node:
                return "intra_node"
            mod = t.nodes_per_rack + 1  # the spare node closes the map
            partner = ((pa.node + pa.index + 1) % mod, t.chips_per_node - 1 - pa.index)
            return "inter_node" if (pb.node, pb.index) == partner else None
        if (pa.node, pa.index) != (pb.node, pb.index) or "inter_rack" not in t.links:
            return None
        slot = pa.node * t.chips_per_node + pa.index
        step = slot % (self.racks - 1) + 1
        fwd, back = (pa.rack + step) % self.racks, (pa.rack - step) % self.racks
        return "inter_rack" if pb.rack in (fwd, back) else None

    # ---- distances
    def hop_count(self, a: int, b: int) -> int:
        """Fewest links on a path from chip a to chip b (0 for a == b)."""
        self._check(a)
        self._check(b)
        if self.topology.kind == "lpx-nodes":
            pa, pb = self.address(a), self.address(b)
            return _lpx_in_rack_hops(pa, pb) + abs(pa.rack - pb.rack)
        if self.topology.kind in _SWITCHED:
            return 0 if a == b else 1
        dist = self._bfs(a).get(b)
        if dist is None:
            raise UserError("chip", f"chip {b} is not reachable from chip {a} in this topology")
        return dist

    def route(self, a: int, b: int) -> list[int]:
        """A deterministic shortest path from a to b, endpoints included.

        LPX: inside a rack the inter-node ("rail") hop comes first, then the intra-node hop;
        across racks the chain hops come first, along the source's (node, index) rail.
        """
        self._check(a)
        self._check(b)
        if self.topology.kind == "lpx-nodes":
            return self._lpx_route(a, b)
        if self.topology.kind in _SWITCHED or a == b:
            return [a] if a == b else [a, b]
        return self._bfs_path(a, b)

    def _lpx_route(self, a: int, b: int) -> list[int]:
        # chip ids by arithmetic (a compile routes ~5 x 10^4 pairs): chip = rack * cpr + node * cpn + index
        cpn = self.topology.chips_per_node
        cpr = cpn * self.topology.nodes_per_rack
        ra, in_a = divmod(a, cpr)
        rb, in_b = divmod(b, cpr)
        path = [a]
        if ra != rb:  # along the source's (node, index) rail to b's rack
            step = cpr if rb > ra else -cpr
            path.extend(range(a + step, rb * cpr + in_a + step, step))
        ia, ib = in_a % cpn, in_b % cpn
        if in_a - ia != in_b - ib:  # another node: the rail hop keeps the index
            path.append(rb * cpr + in_b - ib + ia)
        if ia != ib:
            path.append(b)
        return path

    def path_links(self, path: list[int]) -> list[tuple[int, int, str]]:
        """The (from, to, role) hops of a chip path; a non-adjacent step is a UserError."""
        hops = []
        for a, b in zip(path, path[1:], strict=False):
            role = self.link_role(a, b)
            if role is None:
                raise UserError("path", f"chips {a} and {b} are not directly linked")
            hops.append((a, b, role))
        return hops

    def path_latency_s(self, path: list[int]) -> float:
        """First-bit latency along a chip path: the sum of each hop's link latency."""
        return sum(float(self.topology.links[role].latency_s) for _, _, role in self.path_links(path))

    def diameter(self) -> int:
        """The largest hop count between any two chips."""
        t = self.topology
        if t.kind == "lpx-nodes":
            return int(t.chips_per_node > 1) + int(t.nodes_per_rack > 1) + (self.racks - 1)
        if t.kind in _SWITCHED:
            return int(self.n_chips > 1)
        return max(max(self._bfs(c).values()) for c in range(self.n_chips))

    def links_per_chip(self, role: str) -> int:
        """How many links of `role` the most connected chip has (chain interior for inter-rack)."""
        return max(sum(1 for _, r in self.neighbors(c) if r == role) for c in self._sample_chips())

    def _sample_chips(self) -> list[int]:
        middle = self.racks // 2
        return [
            self.chip(middle, n, i)
            for n in range(self.topology.nodes_per_rack)
            for i in range(self.topology.chips_per_node)
        ]

    def _bfs(self, src: int) -> dict[int, int]:
        if src not in self._bfs_cache:
            dist = {src: 0}
            queue = deque([src])
            while queue:
                c = queue.popleft()
                for n, _ in self._adjacency[c]:
                    if n not in dist:
                        dist[n] = dist[c] + 1
                        queue.append(n)
            self._bfs_cache[src] = dist
        return self._bfs_cache[src]

    def _bfs_path(self, a: int, b: int) -> list[int]:
        parent = {a: a}
        queue = deque([a])
        while queue and b not in parent:
            c = queue.popleft()
            for n, _ in self._adjacency[c]:
                if n not in parent:
                    parent[n] = c
                    queue.append(n)
        if b not in parent:
            raise UserError("chip", f"chip {b} is not reachable from chip {a} in this topology")
        path = [b]
        while path[-1] != a:
            path.append(parent[path[-1]])
        return path[::-1]

    @cached_property
    def _adjacency(self) -> list[list[tuple[int, str]]]:
        return [self.neighbors(c) for c in range(self.n_chips)]


def _lpx_in_rack_hops(pa: ChipAddr, pb: ChipAddr) -> int:
    return int(pa.node != pb.node) + int(pa.index != pb.index)


def chip_graph(system_or_topology: object, racks: int = 1) -> ChipGraph:
    """A ChipGraph for a SystemSpec (its current topology) or a Topology."""
    topo = getattr(system_or_topology, "topology", system_or_topology)
    if not isinstance(topo, Topology):
        raise TypeError("chip_graph needs a SystemSpec or a Topology")
    return ChipGraph(topo, racks)
