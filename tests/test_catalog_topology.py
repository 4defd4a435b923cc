"""Chip graphs: link roles, neighbours, hop counts and routes over the catalog topologies."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lpxsim.catalog import get_system
from lpxsim.core.errors import UserError
from lpxsim.specs.topology import ChipAddr, chip_graph


def _bfs_hops(g, src: int) -> dict[int, int]:
    dist = {src: 0}
    q = deque([src])
    while q:
        c = q.popleft()
        for n, _ in g.neighbors(c):
            if n not in dist:
                dist[n] = dist[c] + 1
                q.append(n)
    return dist


def test_lpx_numbering_round_trips() -> None:
    g = chip_graph(get_system("lpx"), racks=2)
    assert g.n_chips == 512
    assert g.address(0) == ChipAddr(0, 0, 0)
    assert g.address(255) == ChipAddr(0, 15, 15)
    assert g.address(256 + 17) == ChipAddr(1, 1, 1)
    for c in (0, 15, 16, 255, 256, 511):
        a = g.address(c)
        assert g.chip(a.rack, a.node, a.index) == c
    with pytest.raises(UserError, match="chip"):
        g.address(512)


def test_lpx_link_roles_follow_the_16x16_wiring() -> None:
    g = chip_graph(get_system("lpx"), racks=3)
    assert g.link_role(0, 5) == "intra_node"  # same node
    assert g.link_role(0, 16) == "inter_node"  # same index, other node
    assert g.link_role(0, 17) is None  # other node, other index: two hops
    assert g.link_role(3, 256 + 3) == "inter_rack"  # same position, next rack
    assert g.link_role(3, 512 + 3) is None  # daisy chain, not a ring or a switch
    assert g.link_role(4, 4) is None
    assert g.link(0, 16).bandwidth_Bps == pytest.approx(25e9)  # 2 lanes x 100 Gb/s
    assert g.link(0, 1).bandwidth_Bps == pytest.approx(50e9)


def test_lpx_neighbour_counts_match_the_lane_budget() -> None:
    s = get_system("lpx")
    for sys_ in (s, s.with_topology("trays-32x8")):
        g = chip_graph(sys_, racks=3)
        for role in ("intra_node", "inter_node", "inter_rack"):
            link = sys_.topology.links[role]
            lanes = g.links_per_chip(role) * float(link.lanes_per_link)
            assert lanes == float(link.lanes_per_chip), (sys_.topology.chips_per_node, role)


@pytest.mark.parametrize("variant", [None, "trays-32x8"])
def test_any_two_lpus_in_a_rack_are_at_most_two_hops_apart(variant: str | None) -> None:
    s = get_system("lpx")
    s = s.with_topology(variant) if variant else s
    g = chip_graph(s)
    assert g.diameter() == 2
    for src in (0, 37, 255):
        bfs = _bfs_hops(g, src)
        assert len(bfs) == 256
        assert max(bfs.values()) == 2
        assert all(g.hop_count(src, b) == d for b, d in bfs.items())


def test_multi_rack_hops_add_the_chain_length() -> None:
    g = chip_graph(get_system("lpx"), racks=4)
    assert g.diameter() == 2 + 3
    bfs = _bfs_hops(g, 5)
    assert all(g.hop_count(5, b) == d for b, d in bfs.items())
    assert g.route(0, 3 * 256 + 255) == [0, 256, 512, 768, 768 + 240, 768 + 255]


@settings(max_examples=200, deadline=None)
@given(racks=st.integers(1, 3), data=st.data())
def test_lpx_routes_are_shortest_and_use_real_links(racks: int, data) -> None:
    g = chip_graph(get_system("lpx"), racks=racks)
    a = data.draw(st.integers(0, g.n_chips - 1))
    b = data.draw(st.integers(0, g.n_chips - 1))
    path = g.route(a, b)
    assert path[0] == a and path[-1] == b
    assert len(path) - 1 == g.hop_count(a, b) == g.hop_count(b, a)
    assert all(g.link_role(x, y) is not None for x, y in zip(path, path[1:], strict=False))


def test_gpu_domains_are_one_hop() -> None:
    g = chip_graph(get_system("vr-nvl72"), racks=2)
    assert g.link_role(0, 71) == "scale_up"
    assert g.link_role(0, 72) == "scale_out"
    assert g.hop_count(3, 140) == 1 and g.route(3, 140) == [3, 140]
    h = chip_graph(get_system("h200-hgx"))
    assert h.diameter() == 1 and len(h.neighbors(0)) == 7


def test_groq_v1_dragonfly_hops() -> None:
    s = get_system("groq-v1")
    one = chip_graph(s)
    assert one.diameter() == 3  # local, global, local inside a rack
    assert one.link_role(0, 7) == "intra_node"
    # TSP 0 of node 0 pairs with TSP 7 of node 1 (assumed port map)
    assert one.link_role(0, one.chip(0, 1, 7)) == "inter_node"
    four = chip_graph(s, racks=4)
    assert four.diameter() <= 5  # ISCA'22: <= 5 hops
    path = four.route(0, four.n_chips - 1)
    assert len(path) - 1 == four.hop_count(0, four.n_chips - 1)
    assert all(four.link_role(x, y) is not None for x, y in zip(path, path[1:], strict=False))
    for c in range(0, four.n_chips, 37):  # links are symmetric
        for n, role in four.neighbors(c):
            assert four.link_role(n, c) == role


def test_bad_rack_count_is_a_user_error() -> None:
    with pytest.raises(UserError, match="racks"):
        chip_graph(get_system("lpx"), racks=0)


def test_path_latency_sums_hop_latencies() -> None:
    g = chip_graph(get_system("lpx"), racks=2)
    path = g.route(0, 256 + 255)
    assert [r for _, _, r in g.path_links(path)] == ["inter_rack", "inter_node", "intra_node"]
    assert g.path_latency_s(path) == pytest.approx(562.5e-9 + 2 * 350e-9)
    with pytest.raises(UserError, match="path"):
        g.path_links([0, 17])


def test_nine_rack_reach_latency_reproduces_hot_chips_from_the_middle_rack() -> None:
    """HC26: 2.95 us reaches 1,152 GB (9 racks); the inter-rack hop latency was derived from it (E)."""
    s = get_system("lpx")
    g = chip_graph(s, racks=9)
    src = g.chip(4, 0, 0)
    far = max(range(g.n_chips), key=lambda c: g.path_latency_s(g.route(src, c)))
    assert g.path_latency_s(g.route(src, far)) == pytest.approx(2.95e-6)
    assert s.memory_bytes(9) == pytest.approx(1152e9)
    one_node = g.path_latency_s(g.route(src, g.chip(4, 0, 15)))
    assert one_node == pytest.approx(0.35e-6)  # HC26: 0.35 us at 8 GB
