"""The LPX compiler on tiny models: every compiled Program verifies, corruptions are caught, bad input is one error."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.graph import Phase
from lpxsim.lpu import Program, compile_program, verify
from lpxsim.specs.model import ModelSpec

DATA = Path(__file__).parent / "data" / "emulate"
TINY = ["gemma4_tiny", "llama_tiny", "mixtral_tiny"]


def tiny(name: str) -> ModelSpec:
    return ModelSpec.from_path(DATA / f"{name}.json")


def small(layout: str, name: str = "llama_tiny", chips: int = 8, sram: int = 400_000, context: int = 12,
          concurrency: int = 2, **kw):
    return compile_program(tiny(name), "lpx", chips=chips, context=context, concurrency=concurrency, layout=layout,
                           chip_sram_bytes=sram, weights="bf16", **kw)


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("layout", ["tp=4,stages=2,kvsplit=2", "tp=8,stages=1,kvsplit=4", "tp=2,stages=2",
                                    "tp=1,stages=2"])
def test_tiny_layouts_verify(name: str, layout: str) -> None:
    r = small(layout, name)
    assert r.report.ok, r.report.errors[:5]
    assert r.report.link_conflicts == 0
    assert r.timing.latency_s > 0 and r.timing.interval_s <= r.timing.latency_s + 1e-12


def test_splits_are_explicit() -> None:
    """tp=8 with kvsplit=2 on 8 query / 2 KV heads: heads split 4 ways, KV heads replicated, sequence split."""
    r = small("tp=8,stages=1,kvsplit=2", context=20)
    att = [i for i in r.program.instructions if i.kind == "attention" and i.op == "L0.attention"]
    assert len(att) == 8
    heads = {i.slice["heads"] for i in att}
    assert heads == {(0, 2), (2, 4), (4, 6), (6, 8)}
    seqs = {i.slice["kv_stripe"] for i in att}
    assert seqs == {(0, 2), (1, 2)}  # two sequence shares: even and odd positions
    kvh = [i.slice["kv_heads"] for i in att]
    assert max(kvh.count(k) for k in set(kvh)) > 1  # a KV head held by several chips
    kinds = {i.kind for i in r.program.instructions}
    assert {"combine", "reduce"} <= kinds
    mlp = [i for i in r.program.instructions if i.op == "L0.gate_up"]
    assert len({i.slice["cols"] for i in mlp}) == 8


def test_kv_spread_uses_helper_chips() -> None:
    """kvspread=1: each chip's KV chunk is halved with a chip of the other stage, which attends over it."""
    r = small("tp=4,stages=2,kvsplit=2,kvspread=1", context=40)
    assert r.report.ok
    att = [i for i in r.program.instructions if i.op == "L0.attention" and i.kind == "attention"]
    stage0 = set(r.program.layout.stage_list[0].chips)
    assert any(i.chip not in stage0 for i in att)  # helpers in stage 1 attend over layer 0's KV
    merges = [i for i in r.program.instructions if i.op == "L0.attention" and i.kind == "combine"
              and i.attrs.get("mode") == "merge"]
    assert len(merges) == 4
    kv_regions = {x.name for x in r.program.regions if x.kind == "kv" and x.chip not in stage0}
    assert any(n.startswith("kv:L0<") for n in kv_regions)


def test_experts_split() -> None:
    r = small("tp=4,stages=1", "mixtral_tiny", chips=4, sram=600_000)
    ex = [i for i in r.program.instructions if i.kind == "experts" and i.op == "L0.experts"]
    assert sorted(i.slice["experts"] for i in ex) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert r.report.ok


def test_program_json_roundtrip() -> None:
    r = small("tp=4,stages=2,kvsplit=2", "gemma4_tiny")
    back = Program.from_json(r.program.to_json())
    assert back.to_json() == r.program.to_json()
    assert verify(back).ok


def test_deterministic() -> None:
    a = small("tp=4,stages=2,kvsplit=2").program.to_json()
    b = small("tp=4,stages=2,kvsplit=2").program.to_json()
    assert a == b


# --- corruption is caught -------------------------------------------------------------------
def _corrupt(p: Program, how: str) -> Program:
    q = Program.from_dict(p.to_dict())
    if how == "early_read":  # an instruction starting before its input arrives
        for k, ins in enumerate(q.instructions):
            if any(b in {t.dst_buffer for t in q.transfers} for b in ins.inputs):
                q.instructions[k] = dataclasses.replace(ins, cycle_start=0, first_out_cycle=0)
                return q
    if how == "link_clash":  # two transfers on the same link direction at once
        by_link: dict = {}
        for k, t in enumerate(q.transfers):
            by_link.setdefault(t.links[0], []).append(k)
        k1, k2 = next(v for v in by_link.values() if len(v) > 1)[:2]
        q.transfers[k2] = dataclasses.replace(q.transfers[k2], send_cycle=q.transfers[k1].send_cycle,
                                              arrive_cycle=q.transfers[k2].arrive_cycle + 10**6,
                                              end_cycle=q.transfers[k2].end_cycle + 10**6)
        return q
    if how == "region_overlap":
        r0 = q.regions[0]
        q.regions.append(dataclasses.replace(r0, name="intruder", offset_bytes=r0.offset_bytes))
        return q
    if how == "over_capacity":
        q.regions[-1] = dataclasses.replace(q.regions[-1], size_bytes=q.chip_sram_bytes)
        return q
    if how == "unit_overlap":  # two instructions on one unit at once
        by: dict = {}
        for k, ins in enumerate(q.instructions):
            by.setdefault((ins.chip, ins.unit), []).append(k)
        k1, k2 = next(v for v in by.values() if len(v) > 1)[:2]
        a = q.instructions[k1]
        q.instructions[k2] = dataclasses.replace(q.instructions[k2], cycle_start=a.cycle_start)
        return q
    if how == "missing_input":
        ins = q.instructions[-1]
        q.instructions[-1] = dataclasses.replace(ins, inputs=(*ins.inputs, "nothing@0"))
        return q
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["early_read", "link_clash", "region_overlap", "over_capacity", "missing_input",
                                 "unit_overlap"])
def test_corrupted_program_fails(how: str) -> None:
    p = small("tp=4,stages=2,kvsplit=2").program
    assert verify(p).ok
    rep = verify(_corrupt(p, how))
    assert not rep.ok
    if how == "link_clash":
        assert rep.link_conflicts > 0
    if how == "unit_overlap":
        assert any(e.startswith("unit") for e in rep.errors)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hidden=st.sampled_from([64, 128, 256]),
    layers=st.integers(2, 4),
    heads_kv=st.sampled_from([(4, 1), (4, 2), (8, 2), (4, 4)]),
    moe=st.booleans(),
    tp=st.sampled_from([1, 2, 4, 8]),
    stages=st.integers(1, 2),
    kvsplit=st.sampled_from([1, 2]),
    spread=st.sampled_from([0, 1]),
    context=st.integers(0, 64),
    batch=st.integers(1, 3),
    variant=st.sampled_from([None, "trays-32x8"]),
)
def test_random_models_verify(hidden, layers, heads_kv, moe, tp, stages, kvsplit, spread, context, batch,
                              variant) -> None:
    heads, kvh = heads_kv
    assume(tp % kvsplit == 0 and tp * stages <= 16 and spread < stages)
    cfg = {"model_type": "mixtral" if moe else "llama", "hidden_size": hidden, "intermediate_size": 2 * hidden,
           "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kvh,
           "head_dim": hidden // heads, "vocab_size": 512, "max_position_embeddings": 4096,
           "tie_word_embeddings": False, "rms_norm_eps": 1e-5}
    if moe:
        cfg |= {"num_local_experts": 4, "num_experts_per_tok": 2}
    m = ModelSpec.from_config(cfg, name="random")
    try:
        r = compile_program(m, "lpx", chips=16, context=context, concurrency=batch,
                            layout=f"tp={tp},stages={stages},kvsplit={kvsplit},kvspread={spread}",
                            chip_sram_bytes=8_000_000,
                            weights="bf16", variant=variant)
    except DoesNotFit:  # e.g. 4 bf16 experts x 3 layers on one 8 MB chip (tp=1): nothing to verify
        assume(False)
    assert r.report.ok, r.report.errors[:3]
    assert not verify(_corrupt(r.program, "missing_input")).ok


def test_multi_rack_and_prefill_verify() -> None:
    m = tiny("llama_tiny")
    r = compile_program(m, "lpx", racks=2, context=8, layout="tp=16,stages=2", weights="bf16")
    assert r.report.ok
    assert {r.program.links[lid].cls for lid in r.program.links} >= {"intra_node"}
    r2 = compile_program(m, "lpx", chips=8, phase=Phase.prefill(32, context=16), layout="tp=4,stages=2",
                         weights="bf16")
    assert r2.report.ok


@pytest.mark.parametrize("stats", [False, True])
def test_send_many_equals_send_loop(stats: bool) -> None:
    """`Scheduler.send_many` (all-reduce exchanges) schedules exactly what the same `send` calls in order do:
    transfers, ready times, link reservations and the critical-path breakdown, also over multi-hop routes
    and links the sends contend for; `stats`: each source's bytes are final only at its own `complete_at`
    (split-K statistics)."""
    from lpxsim.catalog import get_system
    from lpxsim.lpu.arch import arch_for
    from lpxsim.lpu.schedule import Scheduler
    from lpxsim.specs.topology import chip_graph

    system = get_system("lpx")
    cpn = system.topology.chips_per_node
    chips = [0, 1, 2, cpn, cpn + 1, 2 * cpn + 3, system.chips_per_unit + 5]  # one node, other nodes, another rack
    scheds = [Scheduler(arch_for(system), chip_graph(system, 2)) for _ in range(2)]
    sends = [(a, b, f"x@{a}", f"y{a}@{b}") for a in chips for b in chips if a != b]
    sends.append((chips[0], chips[1], "x@0", "again"))  # the same link twice
    for s in scheds:  # sources ready at different times; some stream slower than the links (a late start)
        for i, c in enumerate(chips):
            n0 = s.prov.node(100 * i)
            s.buffer(f"x@{c}", c, "x", 20_000)
            s.ready.add(f"x@{c}", 100 * i, 100 * i + 7_000 * (i % 3), n0, s.prov.node(100 * i + 7_000 * (i % 3), n0))
        s.buffer("pre", chips[1], "x", 5_000)
        s.send(chips[0], chips[1], "x@0", "pre", 5_000)  # a link already busy before the exchange
        for _, b, _, dst in sends:
            s.buffer(dst, b, "x", 20_000)
    done = {c: 3_000 * (i % 2) + 50 * i for i, c in enumerate(chips)} if stats else None
    for a, b, src, dst in sends:
        scheds[0].send(a, b, src, dst, 20_000, complete_at=done[a] if done else None)
    scheds[1].send_many(sends, 20_000, complete_at=done)
    loop, many = scheds
    assert loop.transfers == many.transfers
    assert loop.ready.times() == many.ready.times()
    assert loop.ready.last_reads() == many.ready.last_reads()
    assert (loop.ready.arrived, loop.ready.end_node) == (many.ready.arrived, many.ready.end_node)
    assert loop._link_free == many._link_free
    assert (loop.last_end, loop.prov.breakdown(loop.last_node)) == (many.last_end, many.prov.breakdown(many.last_node))
    assert any(len(t.links) > 1 for t in many.transfers) and any(t.send_cycle > 0 for t in many.transfers)


def test_instruction_attrs_shared_by_content_and_identity() -> None:
    """Instructions with equal attrs and equal work share one attrs dict, whether the caller passes one attrs
    object for all of them (found by identity) or equal copies; a different work, value type or content gives
    its own dict, and an unhashable value is kept unshared."""
    from lpxsim.catalog import get_system
    from lpxsim.lpu.arch import arch_for
    from lpxsim.lpu.schedule import Scheduler
    from lpxsim.specs.topology import chip_graph

    system = get_system("lpx")
    s = Scheduler(arch_for(system), chip_graph(system, 1))
    s.input_ready(s.buffer("x", 0, "x", 64))
    n = [0]

    def instr(attrs, work=100.0):  # noqa: ANN001, ANN202
        n[0] += 1
        s.note_work(nbytes=work)
        out = s.buffer(f"o{n[0]}", n[0] % 16, "op", 64)
        return s.instructions[s.instr(n[0] % 16, "VXM", "op", "norm", ("x",), out, 10.0, None, attrs)].attrs

    a = {"weight": "w", "k": 1}
    first, same_obj, other_work = instr(a), instr(a), instr(a, 200.0)
    copy, float_k, again = instr(dict(a)), instr({"weight": "w", "k": 1.0}), instr(a)
    assert first is same_obj is copy is again and first == {**a, "busy_cycles": 10, "work_bytes": 100.0,
                                                              "work_flops": 0.0, "work_ops": 0.0}
    assert other_work is not first and other_work["work_bytes"] == 200.0
    assert float_k is not first and type(float_k["k"]) is float
    assert instr(None) is instr({}) is instr(None) and "weight" not in instr(None)
    listy = {"weight": "w", "ks": [1]}
    assert instr(listy) is not instr(listy) and instr(listy)["ks"] == [1]
    assert a == {"weight": "w", "k": 1}  # the caller's dict is never changed


@pytest.mark.parametrize("context", [0, 1, 15, 16, 1000, 4097])
@pytest.mark.parametrize("window", [None, 1, 16, 700])
@pytest.mark.parametrize("share", [(0, 1, 1), (1, 4, 1), (3, 4, 16), (2, 3, 5)])
def test_attended_in_share_counts_positions(context: int, window, share) -> None:
    """A decode row's (pairs, keys) in a KV stripe (the scalar path) and a 3-row chunk's (numpy) equal a count
    of the positions themselves."""
    from lpxsim.lpu.lowering import KvStripe, attended_in_share

    i, n, b = share
    s = KvStripe(i, n, b)

    def held(lo: int, hi: int) -> int:
        return sum(1 for p in range(max(lo, 0), hi) if (p // b) % n == i)

    for new in (1, 3):
        rows = [(0 if window is None else max(0, e - window), e) for e in range(context + 1, context + new + 1)]
        want = (float(sum(held(lo, hi) for lo, hi in rows)), held(rows[0][0], rows[-1][1]))
        assert attended_in_share(context, new, window, s) == want


def test_compile_restores_the_garbage_collector() -> None:
    """The compile pauses the cyclic GC and restores the caller's setting, also when it raises."""
    import gc

    was = gc.isenabled()
    try:
        gc.enable()
        small("tp=2,stages=2")
        assert gc.isenabled()
        with pytest.raises(DoesNotFit):
            small("tp=1,stages=1", sram=10_000)
        assert gc.isenabled()
        gc.disable()
        small("tp=2,stages=2")
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_compile_leaves_no_young_objects_to_scan() -> None:
    """A compile's records are handed to the oldest GC generation unscanned: the young generation is empty
    after it (no collector pass over ~10^5 records once the GC is back on), and nothing stays frozen."""
    import gc

    was = gc.isenabled()
    try:
        gc.enable()
        small("tp=2,stages=2")
        assert gc.get_count()[0] < 100
        assert gc.get_freeze_count() == 0
    finally:
        (gc.enable if was else gc.disable)()


# --- bad input ------------------------------------------------------------------------------
def test_model_too_big_is_does_not_fit() -> None:
    with pytest.raises(DoesNotFit):
        compile_program("gemma-4-31b", "lpx", chips=16, context=1000)


def test_forced_layout_over_sram() -> None:
    with pytest.raises(DoesNotFit):
        small("tp=1,stages=1", sram=50_000)


@pytest.mark.parametrize("kw", [{"chips": 0}, {"chips": 100_000}, {"racks": 0.3}])
def test_impossible_chip_count(kw) -> None:
    with pytest.raises(UserError):
        compile_program(tiny("llama_tiny"), "lpx", context=8, **kw)


def test_bad_layout_string() -> None:
    with pytest.raises(UserError):
        small("tp=3,stages=1")
    with pytest.raises(UserError):
        small("tp=four")


def test_gpu_system_rejected() -> None:
    with pytest.raises(UserError):
        compile_program(tiny("llama_tiny"), "h200-hgx", context=8)


def test_trace_is_valid_json(tmp_path: Path) -> None:
    from lpxsim.lpu.trace import write_trace

    r = small("tp=4,stages=2,kvsplit=2")
    path = write_trace(r.program, tmp_path / "t.json")
    doc = json.loads(path.read_text())
    ev = doc["traceEvents"]
    assert any(e["ph"] == "X" and e["cat"] == "link" for e in ev)
    assert all({"ph", "pid", "name"} <= set(e) for e in ev)
    assert not list(tmp_path.glob(".*tmp"))


@pytest.mark.parametrize("layout", ["tp=8,stages=2", "tp=16,stages=1"])
def test_groq_v1_compiles_verifies_and_times_by_mechanism(layout: str) -> None:
    """First-generation TSPs (900 MHz, 8-chip nodes joined by the Dragonfly's global links) compile and verify;
    the critical path's mechanisms add up to the step and include the slower global C2C hops."""
    r = compile_program(tiny("llama_tiny"), "groq-v1", chips=16, context=64, layout=layout,
                        chip_sram_bytes=2_000_000, weights="int8")
    assert r.report.ok, r.report.errors[:3]
    assert r.program.clock_hz == pytest.approx(900e6)
    t = r.timing
    assert sum(t.breakdown_us.values()) == pytest.approx(t.latency_s * 1e6, rel=1e-9)
    assert t.breakdown_us["c2c_hop"] > 0 and t.breakdown_us["stream_transit"] > 0
    assert 0 < t.fitted_share < 1


def test_breakdown_moves_with_its_mechanism() -> None:
    """Doubling a mechanism's cycles raises exactly that entry of the breakdown (the attribution is not
    a fixed split)."""
    from lpxsim.catalog import get_system
    from lpxsim.graph import lower
    from lpxsim.lpu.arch import arch_for
    from lpxsim.lpu.compiler import build_program
    from lpxsim.lpu.layout import Layout
    from lpxsim.lpu.timing import summarize

    s = get_system("lpx")
    g = lower(tiny("llama_tiny"), Phase.decode([32]), weights="bf16")
    base = arch_for(s).with_sram(2_000_000)
    out = {}
    for k in (1, 2):
        arch = dataclasses.replace(base, stream_transit=base.stream_transit * k)
        prog, _ = build_program(g, s, 1, arch, Layout(tp=4, stages=2), 16)
        out[k] = summarize(prog, g, arch)
    assert out[2].breakdown_us["stream_transit"] > 1.5 * out[1].breakdown_us["stream_transit"]
    assert out[2].latency_s > out[1].latency_s


@pytest.mark.parametrize("name", TINY)
def test_every_instruction_records_its_work_and_is_no_faster_than_it(name: str) -> None:
    """Instruction attrs carry work_bytes / work_flops (at work_flop_rate) / work_ops and Program.meta the unit
    rates: busy cycles are at least each of them at its rate (what verify's cost check relies on)."""
    r = small("tp=4,stages=2,kvsplit=2", name=name, sram=2_000_000)
    rates = r.program.meta["rates"]
    vb = rates["vector_bytes"]
    assert any(i.attrs["work_flops"] > 0 for i in r.program.instructions)
    for ins in r.program.instructions:
        a = ins.attrs
        busy = a["busy_cycles"]
        assert busy + 1e-9 >= (a["work_bytes"] // vb) * vb / rates["feed_bytes_per_cycle"], ins
        assert busy + 1e-9 >= a["work_ops"] / rates["vxm_ops_per_cycle"], ins
        if a["work_flops"]:
            assert a["work_flop_rate"] in rates["mxm_flops_per_cycle"].values()
            assert busy + 1e-9 >= a["work_flops"] / a["work_flop_rate"], ins


def test_kv_reads_reach_the_critical_path_when_nothing_spreads_them() -> None:
    """T2 = T1 on the deployed layout because each KV holder's read hides in slack; without a sequence split
    or spread the read is on the critical path and a longer context is slower, through `vector_count`."""
    t = {ctx: small("tp=4,stages=2,kvsplit=1", context=ctx, concurrency=1, sram=8_000_000).timing
         for ctx in (64, 20_000)}
    assert t[20_000].latency_s > t[64].latency_s
    assert t[20_000].breakdown_us["vector_count"] > t[64].breakdown_us["vector_count"]


@pytest.mark.parametrize(("layout", "phase"), [("tp=4,stages=2,kvsplit=2", Phase.decode([12, 9])),
                                               ("tp=16,stages=2", Phase.prefill(32, context=16))])
def test_scheduler_last_reads_equal_a_pass_over_the_program(layout: str, phase: Phase) -> None:
    """The last read the scheduler keeps on each ready entry (what placement uses) equals `last_reads` over
    the scheduled instructions and transfers, for every buffer; no buffer is written twice (and when one is,
    `written_once` says so)."""
    from lpxsim.catalog import get_system
    from lpxsim.graph import lower
    from lpxsim.lpu.arch import arch_for
    from lpxsim.lpu.emit import emit_all
    from lpxsim.lpu.layout import Layout as Lay
    from lpxsim.lpu.layout import parse_layout, realise
    from lpxsim.lpu.lowering import Lowerer
    from lpxsim.lpu.place import last_reads
    from lpxsim.lpu.schedule import Scheduler
    from lpxsim.specs.topology import chip_graph

    system = get_system("lpx")
    graph = lower(tiny("llama_tiny"), phase, weights="bf16")
    lay = Lay(**{"replicas": 1, "kv_seq_split": 1, **parse_layout(layout)})
    sched = Scheduler(arch_for(system), chip_graph(system, 1))
    emit_all(Lowerer(graph, sched.arch, sched, lay, realise(graph.model, lay, graph.weights)))
    assert sched.written_once()
    want = last_reads(sched.instructions, sched.transfers)
    kept = sched.ready.last_reads()
    assert kept == want and len(want) > 10
    sched.input_ready(sched.transfers[0].dst_buffer)  # written twice: placement must take the pass instead
    assert not sched.written_once()


def _first_fit_by_scan(items):  # the first-fit rule written plainly: every earlier live buffer, lowest offset
    offs, live, top = [], [], 0
    for start, _, size, last, _ in sorted(items, key=lambda x: (x[0], x[1])):
        end = last + 1  # an item holds its last live cycle
        live = [x for x in live if x[2] > start]
        off = 0
        for a_off, a_top, _ in sorted(live):
            if off + size <= a_off:
                break
            off = max(off, a_top)
        offs.append(off)
        live.append((off, off + size, end))
        top = max(top, off + size)
    return offs, top


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 30), st.integers(1, 12)), min_size=1, max_size=40))
def test_first_fit_equals_a_plain_scan(spec) -> None:
    """Placement's first fit (with its shortcut while the live buffers are packed) gives the offsets and region
    size of the plain rule, also where buffers die out of order and leave holes."""
    from array import array

    from lpxsim.lpu.place import _first_fit

    items = [(start, f"b{i:02d}", 320 * size, start + life, i) for i, (size, start, life) in enumerate(spec)]
    want = _first_fit_by_scan(items)
    offsets = array("q", [-1] * len(items))
    top = _first_fit(items, offsets)
    assert ([offsets[x[4]] for x in items], top) == want  # items are sorted by (start, id) in place
    assert [x[1] for x in items] == [x[1] for x in sorted(items, key=lambda x: (x[0], x[1]))]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), min_size=0, max_size=30))
def test_busy_union_equals_a_cycle_count(spans) -> None:
    """The timing summary's union of busy intervals equals the number of cycles some interval covers."""
    import numpy as np

    from lpxsim.lpu.timing import _union

    starts = np.array([s for s, _ in spans], np.int64)
    ends = np.array([s + d for s, d in spans], np.int64)
    covered = {c for s, d in spans for c in range(s, s + d)}
    assert _union(starts, ends) == len(covered)


def test_chip_paths_are_shared_by_equal_chip_graphs_and_equal_routes() -> None:
    """The route memo is one per (topology, racks) in a process, and holds exactly `ChipGraph.route`."""
    from lpxsim.catalog import get_system
    from lpxsim.lpu.arch import arch_for
    from lpxsim.lpu.schedule import Scheduler, chip_paths
    from lpxsim.specs.topology import chip_graph

    system = get_system("lpx")
    g2, again, g1 = chip_graph(system, 2), chip_graph(system, 2), chip_graph(system, 1)
    assert chip_paths(g2) is chip_paths(again) and chip_paths(g1) is not chip_paths(g2)
    s = Scheduler(arch_for(system), g2)
    far = system.chips_per_unit + 13
    s.route(0, far)
    s.route(5, 3)
    assert chip_paths(again)[(0, far)] == tuple(g2.route(0, far)) and len(g2.route(0, far)) > 2
    assert chip_paths(again)[(5, 3)] == tuple(g2.route(5, 3))
    assert (0, far) not in chip_paths(g1)


def test_place_consumes_ready_and_keeps_lifetimes() -> None:
    """Placement pops every ready slot it reads (peak memory) and still gives each buffer the lifetime
    [first vector, last read] + 1: a transfer buffer and an activation buffer live at once get disjoint
    bytes, and one never written lives [0, 1) in the transfer buffer region."""
    from lpxsim.lpu.lowering import ChipUse
    from lpxsim.lpu.place import ALIGN, place
    from lpxsim.lpu.program import Buffer, BufferTable
    from lpxsim.lpu.schedule import ReadyTable

    bufs = {k: Buffer(k, 0, "x", bytes=ALIGN) for k in ("a", "b", "c", "d", "never")}
    table = BufferTable(bufs)
    ready = ReadyTable(table.index)
    for bid, first, end, last, arrived in (("a", 0, 5, 9, False), ("b", 9, 12, -1, False), ("c", 3, 4, 7, True),
                                           ("d", 8, 8, -1, True)):
        ready.last[ready.add(bid, first, end, arrived=arrived)] = last
    regions, out, _ = place({0: ChipUse()}, table, ready, None, 10**6)
    assert not table.index  # consumed
    assert set(out) == set(bufs)
    assert {r.name for r in regions} == {"act@0", "buffer@0"}
    assert (out["a"].region, out["b"].region, out["c"].region, out["never"].region) == (
        "act@0", "act@0", "buffer@0", "buffer@0")
    assert out["b"].offset_bytes == ALIGN  # a lives through cycle 9, when b starts
    assert out["d"].offset_bytes == 0  # c's last read (7) is before d arrives (8)
    assert out["never"].offset_bytes == 0  # [0, 1): gone before c arrives


def test_ready_table_rows_are_the_buffers_rows() -> None:
    """The ready table's row k is the buffer at row k of the table whose index it shares: rows are added as
    buffers are declared (unwritten until written); a second write replaces the row's times, unread, and is
    counted (what `written_once` and placement rely on); `times` and `last_reads` cover written rows only."""
    from lpxsim.lpu.program import BufferTable
    from lpxsim.lpu.schedule import UNWRITTEN, ReadyTable

    bt = BufferTable()
    rt = ReadyTable(bt.index)
    for k in ("a", "b", "c"):
        bt.add(k, 0, "x", 320)
    a = rt.add("a", 0, 5, arrived=True)
    rt.last[a] = 9
    b = rt.add("b", 2, 3)
    assert (a, b, len(rt), rt.rewritten) == (0, 1, 2, 0)
    assert rt.last_reads() == {"a": 9}
    assert rt.add("a", 10, 12) == a
    assert (len(rt), rt.rewritten) == (2, 1)
    assert rt.times() == {"a": (10, 12), "b": (2, 3)}
    assert rt.last_reads() == {}  # the rewritten "a" is not read yet
    assert list(rt.arrived[:3]) == [0, 0, UNWRITTEN] and not rt.written(2)
    with pytest.raises(KeyError):
        rt.add("undeclared", 0, 1)


def test_place_does_not_depend_on_the_order_rows_are_written() -> None:
    """The ready rows are the buffers' rows whatever order the buffers are written in: placement gives every
    buffer the same region and offset."""
    from lpxsim.lpu.lowering import ChipUse
    from lpxsim.lpu.place import ALIGN, place
    from lpxsim.lpu.program import Buffer, BufferTable
    from lpxsim.lpu.schedule import ReadyTable

    times = {f"b{i}": (3 * i % 7, 3 * i % 7 + 4, i % 3 == 0) for i in range(12)}
    placed = []
    for order in (sorted(times), sorted(times, reverse=True)):  # declaration order, then the reverse
        bufs = BufferTable({k: Buffer(k, int(k[1:]) % 2, "x", bytes=ALIGN * (1 + int(k[1:]) % 3))
                            for k in sorted(times)})
        ready = ReadyTable(bufs.index)
        for k in order:
            ready.add(k, times[k][0], times[k][1], arrived=times[k][2])
        regions, out, _ = place({0: ChipUse(), 1: ChipUse()}, bufs, ready, None, 10**6)
        assert not bufs.index  # consumed
        placed.append(([(k, b.region, b.offset_bytes) for k, b in out.items()], regions))
    assert placed[0] == placed[1]
    assert len({r for _, r, _ in placed[0][0]}) == 4  # act and buffer regions on both chips


def test_a_finished_scheduler_refuses_to_schedule_more() -> None:
    """`Scheduler.finish` frees the scheduling state (peak memory): a later instruction or send fails loudly
    instead of being scheduled against forgotten unit and link free times."""
    from lpxsim.catalog import get_system
    from lpxsim.lpu.arch import arch_for
    from lpxsim.lpu.schedule import Scheduler
    from lpxsim.specs.topology import chip_graph

    system = get_system("lpx")
    s = Scheduler(arch_for(system), chip_graph(system, 1))
    s.input_ready(s.buffer("x@0", 0, "x", 320))
    s.buffer("y@0", 0, "y", 320)
    s.instr(0, "VXM", "y", "elementwise", ("x@0",), "y@0", 4)
    s.buffer("y@1", 1, "y", 320)
    s.send(0, 1, "y@0", "y@1", 320)
    s.finish()
    s.buffer("z@0", 0, "z", 320)
    with pytest.raises(AttributeError):
        s.instr(0, "VXM", "z", "elementwise", ("y@0",), "z@0", 4)
    with pytest.raises(AttributeError):
        s.send(0, 1, "y@0", "y@1b", 320)


def test_send_many_forwards_what_arrives_in_the_same_call() -> None:
    """`send_many` writes each destination's ready row as it schedules the send, so a later send of the same
    call may forward that buffer: the same schedule as one `send` after another. A source not yet written is
    refused."""
    from lpxsim.catalog import get_system
    from lpxsim.lpu.arch import arch_for
    from lpxsim.lpu.schedule import Scheduler
    from lpxsim.specs.topology import chip_graph

    system = get_system("lpx")
    scheds = [Scheduler(arch_for(system), chip_graph(system, 1)) for _ in range(2)]
    sends = [(0, 1, "x@0", "x@1"), (1, 2, "x@1", "x@2")]
    for s in scheds:
        for c in range(3):
            s.buffer(f"x@{c}", c, "x", 320)
        s.input_ready("x@0")
    for a, b, src, dst in sends:
        scheds[0].send(a, b, src, dst, 320)
    scheds[1].send_many(sends, 320)
    assert scheds[0].transfers == scheds[1].transfers and len(scheds[1].transfers) == 2
    assert scheds[0].ready.times() == scheds[1].ready.times()
    s = scheds[1]
    s.buffer("y@0", 0, "y", 320)
    s.buffer("y@1", 1, "y", 320)
    with pytest.raises(KeyError, match="y@0"):
        s.send_many([(0, 1, "y@0", "y@1")], 320)
