"""LPX targets (targets.md): T1 is the fit point; T2 and T3 are predictions; catalog models compile and verify.

Published figures appear here only as the values predictions are compared with.
"""

from __future__ import annotations

import pytest

from lpxsim.catalog import get_model, model_names
from lpxsim.core.errors import DoesNotFit
from lpxsim.graph import Phase
from lpxsim.lpu import LpxStepModel, compile_program
from lpxsim.lpu.arch import load_fit
from lpxsim.specs.accounting import weight_bytes


def test_gemma_one_rack_compiles_and_verifies() -> None:
    r = compile_program("gemma-4-31b", "lpx", context=10_000)
    assert r.report.ok and r.report.link_conflicts == 0
    assert r.layout.chips <= 256
    assert 1_000 < r.timing.tok_s_user < 20_000


def test_fit_file_records_its_data_point() -> None:
    fit = load_fit()
    assert set(fit["parameters"]) == {"op_overhead_cycles"}  # at most two fitted parameters; one used
    assert 0 < fit["fitted_share"] <= 0.25
    assert fit["fitted_to"]["id"] == "T1" and fit["fitted_to"]["context"] == 10_000


@pytest.fixture(scope="module")
def gemma() -> LpxStepModel:
    return LpxStepModel("gemma-4-31b")


def test_t1_fit_reproduced(gemma: LpxStepModel) -> None:
    t = gemma.compile(Phase.decode([10_000])).timing
    assert t.tok_s_user == pytest.approx(3382, rel=0.005)


@pytest.mark.heavy  # one more ~3 s compile on top of the shared fixture's ~9 s
def test_t2_t3_predicted(gemma: LpxStepModel) -> None:
    t1 = gemma.compile(Phase.decode([10_000])).timing.tok_s_user
    t2 = gemma.compile(Phase.decode([100_000])).timing.tok_s_user
    assert t2 == pytest.approx(3431, rel=0.03)  # targets.md: within ±3 %; the brief aims at ±2 % (−2.1 % now)
    assert 0.97 <= t2 / t1 <= 1.05


def test_t1_breakdown_sums_to_the_step_and_the_fit_is_a_minority(gemma: LpxStepModel) -> None:
    t = gemma.compile(Phase.decode([10_000])).timing
    assert sum(t.breakdown_us.values()) == pytest.approx(t.latency_s * 1e6, rel=1e-9)
    assert all(v >= 0 for v in t.breakdown_us.values()), t.breakdown_us
    mechanisms = {"issue", "sync", "stream_transit", "superlane_stagger", "pipeline_depth", "sram_access",
                  "vector_count", "c2c_hop", "c2c_serialisation"}
    assert mechanisms <= set(t.breakdown_us), set(t.breakdown_us)
    assert t.fitted_share == pytest.approx(t.breakdown_us["fitted_overhead"] / (t.latency_s * 1e6))
    assert 0 < t.fitted_share <= 0.25


def test_mixtral_search_sizes_whole_experts_and_its_first_layout_places() -> None:
    """Regression (issue 13): the lowering places whole experts per chip (ceil(E / tp) of them), so on one
    stage of 208 chips 8 chips each hold one whole expert of all 32 layers (5.6 GB). The search must see that
    (it once took E / tp of each expert, ranked such layouts first and none of its candidates placed)."""
    from lpxsim.graph import lower
    from lpxsim.lpu.arch import arch_for
    from lpxsim.lpu.compiler import Target, build_program, resolve_system
    from lpxsim.lpu.layout import Layout
    from lpxsim.lpu.partition import chip_bytes, choose_layout, estimate_latency_s
    from lpxsim.lpu.timing import summarize

    m = get_model("mixtral-8x7b")
    s, n, units = resolve_system("lpx", 1.0, None)
    arch = arch_for(s)
    assert chip_bytes(m, Layout(tp=208, stages=1, kv_seq_split=16), "fp8", "bf16", "separate", 4096, 1) > 5e9
    cands, _ = choose_layout(m, s, arch, n, Target(4096, 1), "fp8", "bf16", "separate", {"replicas": 1})
    best = cands[0]
    graph = lower(m, Phase.decode([4096]), weights="fp8", kv="bf16", kv_layout="separate")
    prog, placed = build_program(graph, s, units, arch, best, n)  # raises DoesNotFit if it does not place
    worst = max(v["weights"] + v["kv"] for v in placed.values())
    est = chip_bytes(m, best, "fp8", "bf16", "separate", 4096, 1)
    assert worst <= est * 1.01, (best.describe(), worst, est)  # the search's SRAM need is not optimistic
    # the ranking estimate reads one whole expert per chip and layer, as the static schedule does
    # (an even E / tp share of the read put it 23 % below the compiled step)
    lat = summarize(prog, graph, arch).latency_s
    assert estimate_latency_s(m, s, arch, best, "fp8", 4096, 1) == pytest.approx(lat, rel=0.15)


@pytest.mark.heavy
@pytest.mark.parametrize("name", model_names())
def test_every_catalog_model_that_fits_verifies(name: str) -> None:
    m = get_model(name)
    try:
        sm = LpxStepModel(m, context=4096)
    except DoesNotFit:
        assert weight_bytes(m, "fp8") > 0.5 * 9 * 128e9  # only the giants may not fit nine racks
        return
    r = sm.compile(Phase.decode([4096]))
    assert r.program is not None
    from lpxsim.lpu import verify

    rep = verify(r.program)
    assert rep.ok, rep.errors[:3]


@pytest.mark.heavy
def test_groq_v1_llama2_70b_served_per_user_is_predicted() -> None:
    """First generation (issue 13): batch-1 is well above the published ~300 tok/s per user; a busy endpoint
    keeping every pipeline stage full brings it to the published figure with nothing fitted to it."""
    from lpxsim.lpu.served import full_pipeline_tok_s_user

    sm = LpxStepModel("llama-2-70b", "groq-v1", chips=576, weights="int8", context=4096)
    t = sm.timing(Phase.decode([4096]))
    assert t.tok_s_user > 1.3 * 300
    served = full_pipeline_tok_s_user(t.latency_s, t.interval_s, len(t.stage_spans_s))
    assert served == pytest.approx(300, rel=0.10)


@pytest.mark.parametrize("model", ["gemma-4-31b", "deepseek-r1", "gpt-oss-120b", "llama-3.1-70b"])
def test_chip_bytes_per_layer_kind_equals_per_layer(model, monkeypatch):
    """A layout search works out each kind of layer's SRAM terms once (`layer_templates`): the worst chip's
    bytes equal those with every layer worked out on its own, for every layout, context and stream count."""
    from lpxsim.lpu import partition
    from lpxsim.lpu.layout import Layout

    m = get_model(model)
    lays = [Layout(tp=tp, stages=s, kv_seq_split=p, kv_spread=r) for tp in (8, 16, 64) for s in (3, 8, 16)
            for p in (1, 2, 4) for r in (0, 1, 7) if r < s]
    cases = [(ctx, streams) for ctx in (1, 4096, 100_000) for streams in (1, 9)]
    by_kind = [[partition.chip_bytes(m, lay, "fp8", "bf16", "separate", c, n, memo) for lay in lays]
               for c, n in cases for memo in [{}]]
    monkeypatch.setattr(partition, "layer_templates", lambda model: tuple(range(model.num_layers)))
    by_layer = [[partition.chip_bytes(m, lay, "fp8", "bf16", "separate", c, n, memo) for lay in lays]
                for c, n in cases for memo in [{}]]
    assert by_kind == by_layer
