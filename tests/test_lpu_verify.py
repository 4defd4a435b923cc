"""Verify's cost and completeness checks: negative controls on a real compiled program (Gemma 4 31B, one rack).

Each corruption is one the issue-13 audit found verify missing or misreporting; each must fail with its own
error class (and only that class: no misleading "live buffers share bytes").
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lpxsim.catalog import get_model, get_system
from lpxsim.graph import Phase, lower
from lpxsim.lpu import Program, compile_program, verify
from lpxsim.lpu.arch import arch_for
from lpxsim.specs.model import ModelSpec

DATA = Path(__file__).parent / "data" / "emulate"


@pytest.fixture(scope="module")
def gemma():
    """(program, graph, arch) of Gemma 4 31B decode at 10K context on one LPX rack."""
    r = compile_program("gemma-4-31b", "lpx", racks=1, context=10_000, run_verify=False)
    p = r.program
    graph = lower(get_model("gemma-4-31b"), Phase(p.phase["kind"], tuple(p.phase["contexts"]), p.phase["new_tokens"]),
                  weights=p.weights, kv=p.kv, kv_layout=p.kv_layout)
    arch = arch_for(get_system("lpx")).with_sram(p.chip_sram_bytes)
    return p, graph, arch


def _check(gemma, q: Program):
    _, graph, arch = gemma
    return verify(q, graph, arch)


def test_real_program_passes(gemma) -> None:
    rep = _check(gemma, gemma[0])
    assert rep.ok, rep.errors[:5]
    assert rep.skipped == []


def test_mxm_busy_cut_is_a_cost_error(gemma) -> None:
    p = gemma[0]
    k, ins = max(((k, i) for k, i in enumerate(p.instructions) if i.unit == "MXM"),
                 key=lambda x: x[1].attrs["busy_cycles"])
    assert ins.attrs["busy_cycles"] > 100  # the logits matmul (861 cycles when issue 13 was filed)
    lst = list(p.instructions)
    lst[k] = dataclasses.replace(ins, attrs={**ins.attrs, "busy_cycles": 1})
    rep = _check(gemma, dataclasses.replace(p, instructions=lst))
    assert rep.kinds() == {"cost"}, rep.errors[:5]
    assert f"instruction {ins.id} on chip {ins.chip} ({ins.op} matmul) is busy 1 cycles" in rep.errors[0]


def test_missing_partial_sum_is_a_partial_error(gemma) -> None:
    p = gemma[0]
    k, ins = next((k, i) for k, i in enumerate(p.instructions)
                  if i.kind == "reduce" and len(i.inputs) >= 3 and p.buffers[i.output].partial is None
                  and i.attrs.get("fn") != "argmax")
    dropped = ins.inputs[-1]
    lst = list(p.instructions)
    lst[k] = dataclasses.replace(ins, inputs=ins.inputs[:-1])
    trs = [t for t in p.transfers if t.dst_buffer != dropped]
    assert len(trs) == len(p.transfers) - 1
    rep = _check(gemma, dataclasses.replace(p, instructions=lst, transfers=trs))
    assert rep.kinds() == {"partial"}, rep.errors[:5]
    assert any(f"reduction of op {ins.op} on chip {ins.chip} misses 1 of" in e for e in rep.errors)


def test_partial_counted_twice_is_a_partial_error(gemma) -> None:
    """A reduction that reads one partial sum twice: the memoised reachability sees the repeat and reports it."""
    p = gemma[0]
    k, ins = next((k, i) for k, i in enumerate(p.instructions)
                  if i.kind == "reduce" and len(i.inputs) >= 3 and p.buffers[i.output].partial is None
                  and i.attrs.get("fn") != "argmax")
    lst = list(p.instructions)
    lst[k] = dataclasses.replace(ins, inputs=(*ins.inputs, ins.inputs[-1]))
    rep = _check(gemma, dataclasses.replace(p, instructions=lst))
    leaf = next((t.src_buffer for t in p.transfers if t.dst_buffer == ins.inputs[-1]), ins.inputs[-1])
    assert rep.kinds() == {"partial"}, rep.errors[:5]
    assert rep.errors == [f"partial: reduction of op {ins.op} on chip {ins.chip} counts partial sum {leaf} "
                          f"more than once"]


def test_unreduced_partial_is_a_partial_error(gemma) -> None:
    """The partial still arrives but the reduction no longer reads it: it never reaches a reduction."""
    p = gemma[0]
    k, ins = next((k, i) for k, i in enumerate(p.instructions)
                  if i.kind == "reduce" and len(i.inputs) >= 3 and p.buffers[i.output].partial is None)
    lst = list(p.instructions)
    lst[k] = dataclasses.replace(ins, inputs=ins.inputs[:-1])
    rep = _check(gemma, dataclasses.replace(p, instructions=lst))
    assert rep.kinds() == {"partial"}, rep.errors[:5]
    assert any(f"{ins.inputs[-1]} of op {ins.op}" in e and "never reaches a reduction" in e for e in rep.errors)


def test_deleted_weight_region_is_a_weights_error(gemma) -> None:
    p = gemma[0]
    regs = [r for r in p.regions if not r.name.startswith("w:L7.")]
    assert len(regs) < len(p.regions)
    rep = _check(gemma, dataclasses.replace(p, regions=regs))
    assert rep.kinds() == {"weights"}, rep.errors[:5]
    assert "L7." in rep.errors[0] and "which no weight region there holds" in rep.errors[0]


def test_shrunk_weight_region_is_a_weights_error(gemma) -> None:
    p = gemma[0]
    k, r = next((k, r) for k, r in enumerate(p.regions) if r.name == "w:L3.q_proj")
    regs = list(p.regions)
    regs[k] = dataclasses.replace(r, size_bytes=r.size_bytes // 2)
    rep = _check(gemma, dataclasses.replace(p, regions=regs))
    assert rep.kinds() == {"weights"}, rep.errors[:5]
    assert f"L3.q_proj on chip {r.chip} reads" in rep.errors[0]


def test_dropped_next_token_transfers_is_a_token_error(gemma) -> None:
    p = gemma[0]
    trs = [t for t in p.transfers if not t.dst_buffer.startswith("next_tokens@")]
    assert len(trs) < len(p.transfers)
    rep = _check(gemma, dataclasses.replace(p, transfers=trs))
    assert rep.kinds() == {"token"}, rep.errors[:5]
    assert "the sampled token never leaves the last stage for embedding chip" in rep.errors[0]


def test_dropped_logits_sample_tail_is_a_graph_error(gemma) -> None:
    p, graph, _ = gemma
    tail = {op.name for op in graph.ops if op.layer == graph.model.num_layers and op.kind != "norm"}
    assert tail == {"logits", "sample"}
    gone = {i.output for i in p.instructions if i.op in tail}
    lst = [i for i in p.instructions if i.op not in tail]
    trs = [t for t in p.transfers if t.src_buffer not in gone and p.buffers[t.dst_buffer].op not in tail]
    rep = _check(gemma, dataclasses.replace(p, instructions=lst, transfers=trs))
    assert rep.kinds() == {"graph", "token"}, rep.errors[:5]
    assert "graph: op logits (matmul) of the op graph is never computed" in rep.errors
    assert "graph: op sample (sample) of the op graph is never computed" in rep.errors
    assert "token: the sampled token is never produced (no final sample buffer)" in rep.errors


def test_missing_column_slice_is_a_graph_error(gemma) -> None:
    """One chip's slice of a column-split matmul removed (its consumers rewired to nothing): part uncomputed."""
    p = gemma[0]
    k, ins = next((k, i) for k, i in enumerate(p.instructions) if i.op == "L2.gate_up")
    lst = list(p.instructions)
    lst[k] = dataclasses.replace(ins, slice={**ins.slice, "cols": (ins.slice["cols"][0], ins.slice["cols"][0] + 1)})
    rep = _check(gemma, dataclasses.replace(p, instructions=lst))
    assert "graph" in rep.kinds() and "buffer" not in rep.kinds(), rep.errors[:5]
    assert any("op L2.gate_up leaves part of its output uncomputed" in e for e in rep.errors)


def test_duplicated_attention_share_is_a_graph_error(gemma) -> None:
    p = gemma[0]
    att = [k for k, i in enumerate(p.instructions) if i.op == "L5.attention" and i.kind == "attention"]
    a = p.instructions[att[0]]
    kb = next(k for k in att if p.instructions[k].slice["heads"] != a.slice["heads"])
    b = p.instructions[kb]
    lst = list(p.instructions)
    lst[kb] = dataclasses.replace(b, slice={**b.slice, "heads": a.slice["heads"]})
    rep = _check(gemma, dataclasses.replace(p, instructions=lst))
    assert "graph" in rep.kinds(), rep.errors[:5]
    assert any(e.startswith("graph: op L5.attention") for e in rep.errors)


def test_without_graph_a_custom_model_skips_the_work_checks() -> None:
    m = ModelSpec.from_path(DATA / "llama_tiny.json")
    r = compile_program(m, "lpx", chips=4, context=8, layout="tp=4,stages=1", chip_sram_bytes=400_000,
                        weights="bf16")
    assert r.report.ok and r.report.skipped == []
    rep = verify(r.program)
    assert rep.ok and rep.skipped and "not in the catalog" in rep.skipped[0]


def test_catalog_model_rebuilds_its_graph(gemma) -> None:
    rep = verify(gemma[0])
    assert rep.ok and rep.skipped == []


def test_live_buffers_on_the_same_bytes_is_a_buffer_error(gemma) -> None:
    """The one corruption "live buffers share bytes" is meant for still gets that message."""
    from lpxsim.lpu.verify import Columns, lifetimes

    p = gemma[0]
    col = Columns(p)
    t0, t1 = lifetimes(col, col.producers())
    by_region: dict = {}
    for b in p.buffers.values():
        k = col.bid[b.id]
        if b.region and t0[k] >= 0:
            by_region.setdefault((b.chip, b.region), []).append((b, t0[k], t1[k]))
    a, b = next((x[0], y[0]) for items in by_region.values() for x in items for y in items
                if x[0].id != y[0].id and x[1] < y[2] and y[1] < x[2] and x[0].bytes == y[0].bytes)
    bufs = dict(p.buffers)
    bufs[b.id] = dataclasses.replace(b, offset_bytes=a.offset_bytes)
    rep = _check(gemma, dataclasses.replace(p, buffers=bufs))
    assert rep.kinds() == {"buffer"}, rep.errors[:5]
    assert rep.errors[0] == f"buffer: live buffers share bytes in {a.region} on chip {a.chip}"


def test_transfer_serialisation_cut_is_a_cost_error(gemma) -> None:
    p = gemma[0]
    k, t = max(enumerate(p.transfers), key=lambda x: x[1].bytes)
    trs = list(p.transfers)
    trs[k] = dataclasses.replace(t, ser_cycles=1)
    rep = _check(gemma, dataclasses.replace(p, transfers=trs))
    assert rep.kinds() == {"cost"}, rep.errors[:5]
    assert rep.errors[0].startswith(f"cost: transfer {t.id} ")


def test_slice_outside_the_op_is_a_graph_error(gemma) -> None:
    p = gemma[0]
    k, ins = next((k, i) for k, i in enumerate(p.instructions) if i.op == "L4.q_proj")
    lo, hi = ins.slice["cols"]
    lst = list(p.instructions)
    lst[k] = dataclasses.replace(ins, slice={**ins.slice, "cols": (lo + 10**6, hi + 10**6)})
    rep = _check(gemma, dataclasses.replace(p, instructions=lst))
    assert "graph" in rep.kinds(), rep.errors[:5]
    assert any("op L4.q_proj: instruction" in e and "outside its output" in e for e in rep.errors)


def _clash_brute(g, lo, hi, t0, t1) -> list[int]:
    """Regions with a pair of buffers overlapping in bytes and in time, pair by pair."""
    out = set()
    for a in range(len(g)):
        for b in range(a + 1, len(g)):
            if g[a] == g[b] and lo[a] < hi[b] and lo[b] < hi[a] and t0[a] < t1[b] and t0[b] < t1[a]:
                out.add(int(g[a]))
    return sorted(out)


def test_clashing_regions_equals_pairwise() -> None:
    """The sorted sweep finds exactly the regions a pairwise test finds (odd lifetimes, chunked or not)."""
    import numpy as np

    from lpxsim.lpu.verify import _clashing_regions

    rng = np.random.default_rng(7)
    seen = 0
    for _ in range(400):
        n, groups = int(rng.integers(2, 40)), int(rng.integers(1, 6))
        g = rng.integers(0, groups, n)
        lo = rng.integers(0, 50, n)
        hi = lo + rng.integers(1, 20, n)
        t0 = rng.integers(0, 100, n)
        t1 = t0 + rng.integers(-3, 30, n)  # includes empty and inverted lifetimes
        want = _clash_brute(g, lo, hi, t0, t1)
        seen += bool(want)
        for chunk in (1, 5, 1 << 18):
            assert _clashing_regions(g, lo, hi, t0, t1, chunk=chunk) == want
        o = np.lexsort((t0, g))  # sorted by the caller (as `_check_buffers` does)
        assert _clashing_regions(g[o], lo[o], hi[o], t0[o], t1[o], chunk=5, is_sorted=True) == want
    assert 50 < seen < 400  # both outcomes exercised


def test_live_buffers_sharing_bytes_fail_as_buffer(gemma) -> None:
    """Two buffers of one region, alive at the same time, moved onto the same bytes."""
    p = gemma[0]
    q = Program.from_dict(p.to_dict())
    by_region: dict = {}
    for b in q.buffers.values():
        if b.region.startswith("act@"):
            by_region.setdefault((b.chip, b.region), []).append(b)
    bufs = next(v for v in by_region.values() if len(v) > 20)
    # the consumer of the first buffer reads it while the next buffers it feeds are being written: take a
    # buffer written by an instruction that reads the first one
    first = bufs[0]
    reader = next(i for i in q.instructions if first.id in i.inputs and i.chip == first.chip)
    out = q.buffers[reader.output]
    assert out.region == first.region and out.offset_bytes != first.offset_bytes
    q.buffers[out.id] = dataclasses.replace(out, offset_bytes=first.offset_bytes)
    rep = _check(gemma, q)
    assert not rep.ok
    assert rep.kinds() == {"buffer"}
    assert any("live buffers share bytes" in e and first.region in e for e in rep.errors)


def test_identity_and_name_matching_agree(gemma, monkeypatch) -> None:
    """Buffer names matched by object identity (large programs) give the columns the dict gives; a name that
    is an equal but distinct str, or undeclared, sends the mapping through the dict with the same report."""
    import importlib

    import numpy as np

    vmod = importlib.import_module("lpxsim.lpu.verify")
    p = gemma[0]
    by_id = vmod.Columns(p)
    assert by_id._bid is None  # matched by identity, no dict built
    with monkeypatch.context() as m:
        m.setattr(vmod, "IDENTITY_MIN_BUFFERS", 10**12)
        by_dict = vmod.Columns(p)
    assert by_dict._bid is not None
    for f in ("i_out", "r_buf", "t_sbuf", "t_dbuf"):
        assert np.array_equal(getattr(by_dict, f), getattr(by_id, f))
    assert by_id.names == by_dict.names
    lst = list(p.instructions)
    ins = lst[-1]
    copies = tuple("".join(list(b)) for b in ins.inputs)  # equal, not the declared key objects
    assert all(c == b and c is not b for c, b in zip(copies, ins.inputs, strict=True))
    lst[-1] = dataclasses.replace(ins, inputs=(*copies, "nothing@0"))
    q = dataclasses.replace(p, instructions=lst)
    col = vmod.Columns(q)
    assert col._bid is not None and col.names[-1] == "nothing@0"
    assert np.array_equal(col.r_buf[:-1], by_dict.r_buf)
    rep = _check(gemma, q)
    assert rep.kinds() == {"dependency", "buffer"}, rep.errors[:5]  # read, never written, never declared
    assert f"dependency: {ins.op} on chip {ins.chip} reads nothing@0, which nothing writes" in rep.errors
    assert "buffer: 1 buffer(s) used but not declared, e.g. nothing@0" in rep.errors


def test_a_buffer_used_but_not_declared_is_a_buffer_error(gemma) -> None:
    """A buffer an instruction writes and others read, missing from the program's buffers (so no region,
    offset or bytes: no memory check can see it), fails as a buffer error naming it."""
    p = gemma[0]
    ins = next(i for i in p.instructions if i.unit == "MXM")
    bufs = dict(p.buffers)
    del bufs[ins.output]
    rep = _check(gemma, dataclasses.replace(p, buffers=bufs))
    assert not rep.ok
    assert "buffer" in rep.kinds(), rep.errors[:5]
    assert any(f"used but not declared, e.g. {ins.output}" in e for e in rep.errors), rep.errors[:5]


def test_slowest_link_per_route_equals_per_hop(gemma) -> None:
    """The cost check's slowest link per transfer, taken per distinct route, equals the minimum over every
    hop of the transfer (the per-hop expansion), also where a route holds a link the table of rates lacks."""
    import numpy as np

    from lpxsim.lpu.verify_work import slowest_link

    trs = gemma[0].transfers
    link, _, tr, _ = trs.hops()
    nl = int(link.max()) + 1
    bpc = np.random.default_rng(3).uniform(1.0, 9.0, nl)
    for rates in (bpc, bpc[: nl // 2]):  # the second knows only half the links
        want = np.full(len(trs), np.inf)
        ok = link < len(rates)
        np.minimum.at(want, tr[ok], rates[link[ok]])
        got = slowest_link(trs, rates)
        assert np.array_equal(got, want)
        assert np.isinf(got).any() == (rates is not bpc)


def _transfer_errors_by_hand(p: Program) -> tuple[list[str], list[str], int]:
    """The transfer and link messages of a program whose routes use only known links, transfer by transfer
    and hop by hop (the definitions `_check_transfers` computes per distinct route), and the link conflicts."""
    from collections import defaultdict

    groups: dict[str, list[str]] = defaultdict(list)
    windows: dict[tuple[int, int], list[tuple[int, int, int]]] = defaultdict(list)
    hop = {lid: lk.hop_cycles for lid, lk in p.links.items()}
    for t in p.transfers:
        at, connected, path = t.src_chip, True, 0
        for lid, d in t.links:
            lk = p.links[lid]
            frm, to = (lk.a, lk.b) if d == 0 else (lk.b, lk.a)
            connected &= frm == at
            at, path = to, path + lk.hop_cycles
        if not connected:
            groups["connected"].append(f"transfer: transfer {t.id} path is not connected")
        if t.links and at != t.dst_chip:
            groups["ends"].append(f"transfer: transfer {t.id} ends at chip {at}, not {t.dst_chip}")
        if not t.links and t.src_chip != t.dst_chip:
            groups["nolinks"].append(f"transfer: transfer {t.id} has no links between chips")
        if t.arrive_cycle < t.send_cycle + path or t.end_cycle < t.arrive_cycle:
            groups["slow"].append(f"transfer: transfer {t.id} arrives faster than its links allow")
        for n, (lid, d, s, e) in enumerate(t.link_windows(hop)):
            windows[(lid, d)].append((s, len(windows[(lid, d)]), e, n))
    links, total = [], 0
    for lid, d in sorted(windows):
        ends, clashes = -(10**18), 0
        for s, _, e, _ in sorted(windows[(lid, d)]):  # by start, then in program order
            clashes += s < ends
            ends = max(ends, e)
        if clashes:
            total += clashes
            links.append(f"link: link {lid} direction {d} carries two transfers at once ({clashes}x)")
    transfer = [m for k in ("connected", "ends", "nolinks", "slow") for m in groups[k]]
    return transfer, links, total


def test_transfer_checks_per_route_equal_the_per_hop_definitions(gemma) -> None:
    """Paths, destinations, latencies and link windows checked per distinct route give the messages, counts and
    link conflicts of the transfer-by-transfer, hop-by-hop definitions, on a program with every kind of
    transfer error at once (broken and over-long paths, a wrong destination, no links, too fast, clashes)."""
    from dataclasses import replace as rep_

    from lpxsim.lpu.verify import MAX_PER_CLASS

    p = gemma[0]
    T = list(p.transfers)
    leaving: dict[int, list[tuple[int, int, int]]] = {}  # chip -> (link, direction, chip it reaches)
    for lid, lk in p.links.items():
        leaving.setdefault(lk.a, []).append((lid, 0, lk.b))
        leaving.setdefault(lk.b, []).append((lid, 1, lk.a))

    def longer(t, hops: int):  # a connected path of `hops` more hops from t's destination
        links, at = list(t.links), t.dst_chip
        for _ in range(hops):
            lid, d, at = next(x for x in leaving[at] if x[2] != t.src_chip)
            links.append((lid, d))
        return rep_(t, links=tuple(links), dst_chip=at)

    one = [k for k, t in enumerate(T) if len(t.links) == 1]
    a, b, c, e = one[10], one[20], one[30], one[40]
    T[a] = longer(T[a], 2)  # a three-hop route, connected
    T[e] = longer(T[e], 1)
    T[b] = longer(T[b], 1)
    lid, d = T[b].links[1]
    T[b] = rep_(T[b], links=(T[b].links[0], (lid, 1 - d)))  # its second hop reversed: not connected
    T[c] = rep_(T[c], dst_chip=T[c].src_chip)  # ends elsewhere
    T[3] = rep_(T[3], links=()) if T[3].src_chip != T[3].dst_chip else T[3]
    T[4] = rep_(T[4], arrive_cycle=T[4].send_cycle)
    by_link: dict[tuple[int, int], list[int]] = {}
    for k, t in enumerate(T):
        if t.links and k > 4:
            by_link.setdefault(t.links[0], []).append(k)
    shared = [ks for ks in by_link.values() if len(ks) >= 3][:3]
    assert shared
    for ks in shared:  # two later transfers over the same first link sent with the first: clashes
        for k in ks[1:3]:
            dt = T[ks[0]].send_cycle - T[k].send_cycle
            T[k] = rep_(T[k], send_cycle=T[k].send_cycle + dt, arrive_cycle=T[k].arrive_cycle + dt,
                        end_cycle=T[k].end_cycle + dt)
    q = dataclasses.replace(p, transfers=T)
    transfer, links, total = _transfer_errors_by_hand(q)
    assert transfer and links
    r = _check(gemma, q)
    assert r.counts["transfer"] < MAX_PER_CLASS and r.counts["link"] < MAX_PER_CLASS  # every message kept
    assert [e for e in r.errors if e.startswith("transfer:") and "before it exists" not in e] == transfer
    assert [e for e in r.errors if e.startswith("link:")] == links
    assert r.link_conflicts == total


def test_regions_find_a_buffers_region_by_chip_and_name() -> None:
    """`Regions.find` gives the region a dict keyed by (chip, name) gives: entries numbered in order of first
    declaration, a (chip, name) declared twice sized as last declared; -1 for a name not on the buffer's chip
    (or no such name, or a chip outside every region's), -2 for a buffer naming no region."""
    from types import SimpleNamespace

    import numpy as np

    from lpxsim.lpu.program import Region
    from lpxsim.lpu.verify import Regions

    regs = [Region(0, "act", "act", 0, 100), Region(1, "act", "act", 0, 200), Region(1, "w:q", "weights", 200, 50),
            Region(3, "kv", "kv", 0, 10), Region(1, "act", "act", 0, 300), Region(0, "w:q", "weights", 100, 7)]
    reg = Regions(SimpleNamespace(regions=regs))
    entries: dict[tuple[int, str], int] = {}
    size: dict[tuple[int, str], int] = {}
    for r in regs:
        entries.setdefault((r.chip, r.name), len(entries))
        size[(r.chip, r.name)] = r.size_bytes
    assert len(reg) == len(entries)
    assert [reg.key(k) for k in range(len(reg))] == list(entries)
    assert reg.entry_size.tolist() == [size[k] for k in entries]
    chips = [0, 1, 1, 3, 0, 2, 3, 9, -4, 1, 0]
    names = ["act", "act", "w:q", "kv", "kv", "act", "nope", "act", "act", "", None]
    want = [-2 if not n else entries.get((c, n), -1) for c, n in zip(chips, names, strict=True)]
    for chunk in (1 << 16, 3):
        assert reg.find(np.array(chips), names, chunk=chunk).tolist() == want


def test_identity_index_in_chunks_equals_the_dict(gemma) -> None:
    """Buffer names matched by object identity a few at a time give the dict's positions; a name equal to a
    key but not the key object itself gives None (the dict path then decides)."""
    import numpy as np

    from lpxsim.lpu.verify import _identity_index

    bufs = gemma[0].buffers
    keys = list(bufs)
    pick = np.random.default_rng(5).integers(0, len(keys), 5000).tolist()
    names = [keys[k] for k in pick]
    for chunk in (1 << 18, 7, 1):
        got = _identity_index(bufs, iter(names), len(names), chunk=chunk)
        assert got is not None and got.tolist() == pick
    twin = "".join(list(names[100]))  # equal, another object
    assert twin == names[100] and twin is not names[100]
    assert _identity_index(bufs, iter([*names[:100], twin]), 101, chunk=7) is None


def test_released_columns_cannot_be_read(gemma) -> None:
    """The columns verify drops before the work checks are gone: a check reading one would fail, not read stale
    data."""
    from lpxsim.lpu.verify import Columns

    col = Columns(gemma[0])
    assert len(col.b_region) == len(gemma[0].buffers)
    col.release(*col.STRUCTURAL)
    for name in col.STRUCTURAL:
        with pytest.raises(AttributeError):
            getattr(col, name)
    assert len(col.b_bytes) == col.nbuf  # kept: the cost check reads it


def test_cycles_past_int32_verify_as_they_do_below(gemma) -> None:
    """Columns narrowed to int32 where their values fit fall back to int64 where they do not: the program with
    every cycle moved past 2**31 passes, and a corruption of it gives the messages it gives unmoved."""
    p = gemma[0]
    dt = 1 << 31

    def moved(q: Program) -> Program:
        ins = [dataclasses.replace(i, cycle_start=i.cycle_start + dt, first_out_cycle=i.first_out_cycle + dt,
                                   cycle_end=i.cycle_end + dt) for i in q.instructions]
        trs = [dataclasses.replace(t, send_cycle=t.send_cycle + dt, arrive_cycle=t.arrive_cycle + dt,
                                   end_cycle=t.end_cycle + dt) for t in q.transfers]
        return dataclasses.replace(q, instructions=ins, transfers=trs)

    rep = _check(gemma, moved(p))
    assert rep.ok, rep.errors[:5]
    # corruptions: a buffer moved onto the bytes of one it is live with, a transfer arriving too early
    first = next(b for b in p.buffers.values() if b.region.startswith("act@"))
    reader = next(i for i in p.instructions if first.id in i.inputs and i.chip == first.chip)
    bufs = dict(p.buffers)
    bufs[reader.output] = dataclasses.replace(bufs[reader.output], offset_bytes=first.offset_bytes)
    T = list(p.transfers)
    T[7] = dataclasses.replace(T[7], arrive_cycle=T[7].send_cycle)
    bad = dataclasses.replace(p, transfers=T, buffers=bufs)
    want = _check(gemma, bad)
    assert {"buffer", "transfer"} <= want.kinds(), want.errors[:5]
    got = _check(gemma, moved(bad))
    assert (got.errors, got.counts, got.link_conflicts) == (want.errors, want.counts, want.link_conflicts)


def test_ops_found_clean_on_arrays_pass_the_graph_check_one_by_one(gemma, monkeypatch) -> None:
    """The graph check skips the ops `_clean_ops` finds clean on arrays: with none skipped (every op through the
    one-by-one tests) the reports are the same, on the program and on graph corruptions (a gap, a piece
    computed twice on a chip, a box outside the output, an op never computed); most ops are found clean."""
    import numpy as np

    from lpxsim.lpu import verify_work as vw

    p = gemma[0]
    mm = [k for k, i in enumerate(p.instructions) if i.kind == "matmul" and "cols" in i.slice]
    vec = [k for k, i in enumerate(p.instructions) if i.kind not in ("matmul", "attention") and "cols" in i.slice
           and i.slice["cols"][1] - i.slice["cols"][0] > 1]
    progs = [p]
    for k, change in ((mm[3], lambda s: {**s, "cols": (s["cols"][0] + 1, s["cols"][1])}),  # a gap
                      (mm[5], lambda s: {**s, "cols": (s["cols"][0], s["cols"][1] + 10**7)}),  # outside
                      (vec[2], lambda s: {**s, "cols": (s["cols"][0], s["cols"][1] - 1)})):  # a gap
        ins = list(p.instructions)
        ins[k] = dataclasses.replace(ins[k], slice=change(dict(ins[k].slice)))
        progs.append(dataclasses.replace(p, instructions=ins))
    twice = list(p.instructions)  # one instruction's piece computed again by its chip
    twice.append(dataclasses.replace(twice[mm[7]], id=10**9))
    progs.append(dataclasses.replace(p, instructions=twice))
    progs.append(dataclasses.replace(p, instructions=[i for i in p.instructions if i.op != p.instructions[mm[9]].op]))
    seen = []
    real = vw._clean_ops

    def spy(*a):
        out = real(*a)
        seen.append(out)
        return out

    monkeypatch.setattr(vw, "_clean_ops", spy)
    fast = [_check(gemma, q) for q in progs]
    assert np.mean(seen[0]) > 0.5, np.mean(seen[0])  # most ops skip the one-by-one tests
    monkeypatch.setattr(vw, "_clean_ops", lambda *a: np.zeros(len(a[2].ops), bool))
    slow = [_check(gemma, q) for q in progs]
    for f, s in zip(fast, slow, strict=True):
        assert (f.errors, f.counts) == (s.errors, s.counts)
    assert all("graph" in r.kinds() for r in fast[1:]), [sorted(r.kinds()) for r in fast]
