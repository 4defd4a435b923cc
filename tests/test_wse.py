"""Cerebras wafer-scale systems and their StepModel: SRAM-resident weights, layers pipelined over wafers."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from lpxsim.backends.factory import Layout, make_step_model
from lpxsim.catalog import get_model, get_system
from lpxsim.cli.main import app
from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.plan.capacity import capacity
from lpxsim.plan.estimate import steady_state
from lpxsim.specs.accounting import weight_bytes
from lpxsim.specs.summary import system_summary
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepModel
from lpxsim.wse import WseStepModel, stream_elements
from lpxsim.wse.stepmodel import ACTIVATION_BYTES, dependent_phases


def test_cs3_catalog_has_the_reference_facts_and_no_hbm():
    s = get_system("cs-3")
    assert s.is_wafer and not s.is_lpu and s.chips_per_unit == 1
    assert float(s.chip.memory_bytes) == 44e9 and float(s.chip.memory_bw_Bps) == 21e15
    assert float(s.power_w) == pytest.approx(23e3)
    assert get_system("cerebras").name == "cs-3"


def test_the_20b_on_one_70b_on_four_rule_falls_out_of_the_sram_accounting():
    # the rule is Cerebras' (16-bit weights); here it is a check, never an input
    usable = 44e9 * (1 - float(get_system("cs-3").chip.extra["memory_reserve_fraction"]))
    assert usable / 2.0 >= 20e9  # a 20B-parameter model at 2 bytes per weight fits one wafer
    assert WseStepModel("llama-3.1-8b", "cs-3", weights="bf16").wafers == 1
    assert WseStepModel("llama-3.1-70b", "cs-3", weights="bf16").wafers == 4
    assert capacity("llama-3.1-70b", "cs-3", 8192, weights="bf16").units_needed == 4
    with pytest.raises(DoesNotFit, match="needs 4 wafers"):
        WseStepModel("llama-3.1-70b", "cs-3", wafers=3, weights="bf16")
    # layer granularity: 405B's 126 layers of 6.4 GB pack 6 to a wafer, so 22 wafers, not ceil(812 / 41.8) = 20
    step = WseStepModel("llama-3.1-405b", "cs-3", weights="bf16")
    assert step.wafers == 22
    loads = [sum(st.weight_bytes for st in step.stages if st.wafer == w) for w in range(step.wafers)]
    assert max(loads) <= 44e9 * 0.95 and min(loads) > 0


def test_step_model_is_the_sum_of_its_stages_and_handoffs():
    step = WseStepModel("llama-3.1-70b", "cs-3", wafers=4, weights="bf16")
    assert isinstance(step, StepModel) and step.chips == 4 and step.power_w == pytest.approx(4 * 23e3)
    c = step.decode_step(DecodeBatch.uniform(1, 1000))
    times = [step.stage_time(st, 1, 1, 1000) for st in step.stages]
    busy = [step.stage_occupancy(st, 1, 1, 1000) for st in step.stages]
    hop = 8192 * ACTIVATION_BYTES / step.hw.io_Bps + step.hw.io_latency_s
    assert c.latency_s == pytest.approx(sum(times) + 3 * hop)
    assert c.interval_s == pytest.approx(max(busy))  # wavefronts pipeline; only occupancy limits the rate
    assert c.interval_s < c.latency_s / 50  # 81 stages in flight: batch-1 speed is not capacity
    assert sorted({st.wafer for st in step.stages}) == [0, 1, 2, 3]
    walk = [st.wafer for st in step.stages]
    assert walk == sorted(walk)  # contiguous segments


def test_batch1_decode_is_the_strip_rule_by_hand():
    step = WseStepModel("llama-3.1-8b", "cs-3", weights="bf16")
    m = get_model("llama-3.1-8b")
    layer = m.layers[0]
    chip = get_system("cs-3").chip
    assert stream_elements(layer, m.hidden_size) == 3 * 4096 + 14336  # x, attention out, MLP in, MLP hidden
    assert dependent_phases(layer) == 8
    st = step.stages[1]  # stages[0] is the input embedding table
    share = st.weight_bytes / sum(s.weight_bytes for s in step.stages)  # one wafer holds the whole model
    rows = math.isqrt(int(900_000 * share))  # a square tile of the layer's share of the cores
    assert step.tile_rows(st) == rows and 100 < rows < 200
    kv = step._kv_read_bytes(layer, 100)  # one sequence's 100 tokens of KV
    sram = (st.active_weight_bytes + kv) / (21e15 * share * float(chip.extra["sram_efficiency"]))
    wave = 8 * rows * float(chip.extra["fabric_hop_s"])
    # batch 1: the wavefronts plus the SRAM sweep of the layer's region; streaming over ~156 rows is tiny
    assert step.stage_time(st, 1, 1, 100) == pytest.approx(wave + sram)
    assert step.stage_occupancy(st, 1, 1, 100) == pytest.approx(sram)


def test_per_layer_time_grows_slowly_with_width():
    """The mechanism behind Cerebras' published trend (docs/validation.md): a layer's latency is set by
    wavefronts across its tile (sqrt of its share of the wafer) and by its wafer's SRAM sweep, not by its
    width, so 405B's layers (hidden 16,384 on 22 wafers) cost well under twice 70B's (hidden 8,192 on 4)."""
    def per_layer(model, wafers):
        step = WseStepModel(model, "cs-3", wafers=wafers, weights="bf16")
        layers = [st for st in step.stages if st.layer is not None]
        return sum(step.stage_time(st, 1, 1, 1000) for st in layers) / len(layers)

    small, mid, big = per_layer("llama-3.1-8b", 1), per_layer("llama-3.1-70b", 4), per_layer("llama-3.1-405b", 22)
    assert small < mid < big < 1.5 * mid  # a port-serial stream (time ~ width) made it 1.9x


def test_long_context_and_prefill_are_priced():
    step = WseStepModel("llama-3.1-8b", "cs-3", weights="bf16")
    short = step.decode_step(DecodeBatch.uniform(8, 1_000))
    long = step.decode_step(DecodeBatch.uniform(8, 100_000))
    assert long.latency_s > short.latency_s
    p = step.prefill(PrefillChunk(tokens=8192))
    assert p.latency_s > step.decode_step(DecodeBatch.uniform(1, 8192)).latency_s
    assert step.kv_capacity_bytes() == pytest.approx(44e9 * 0.95 - weight_bytes(get_model("llama-3.1-8b"), "bf16"))
    with pytest.raises(UserError):
        step.prefill(PrefillChunk(tokens=0))


def test_pipelining_raises_capacity_at_a_slower_user_speed():
    step = make_step_model("llama-3.1-8b", "cs-3", Layout(), weights="bf16")
    one = steady_state(step, isl=1000, osl=500, concurrency=1)
    many = steady_state(step, isl=1000, osl=500, concurrency=16)
    assert many.tok_s_total > 5 * one.tok_s_total and many.tok_s_user <= one.tok_s_user
    assert many.micro_batches > 1


def test_make_step_model_sizes_by_racks_or_chips():
    assert make_step_model("llama-3.1-70b", "cs-3", Layout(racks=4), weights="bf16").chips == 4
    assert make_step_model("llama-3.1-70b", "cs-3", Layout(chips=5), weights="bf16").chips == 5
    assert make_step_model("llama-3.1-70b", "cs-4", Layout(racks=2), weights="bf16").chips == 6


def test_cs4_says_every_number_is_unpublished():
    s = get_system("cs-4")
    chip_grades = {r.grade for r in s.provenance_rows() if r.path.startswith("chip.")}
    assert chip_grades <= {"U"}
    assert s.power_w.grade == "U" and any("UNPUBLISHED" in n for n in s.notes)
    step = WseStepModel("llama-3.1-70b", "cs-4", weights="bf16")
    assert "graded U" in step.name and "graded U" not in WseStepModel("llama-3.1-8b", "cs-3", weights="bf16").name
    assert step.wafers == 4 and math.isclose(step.power_w, 4 * 23e3)
    # wafers 0-1 and 1-2 hand off over Direct Wafer Links, 2-3 over the system I/O (next rack)
    inner, _ = step._handoff_s(1, 0)
    outer, _ = step._handoff_s(1, 2)
    assert inner < outer and step._handoff_s(1, 1)[0] == inner
    assert system_summary(s)["topology"]["kind"] == "wafer"
    assert any("unpublished" in n for n in capacity("llama-3.1-70b", "cs-4", 8192, weights="bf16", racks=2).notes)
    assert not any("unpublished" in n for n in capacity("llama-3.1-8b", "cs-3", 8192, weights="bf16").notes)


def test_cli_estimate_and_capacity_on_cs3():
    r = CliRunner().invoke(app, ["estimate", "llama-3.1-8b", "--system", "cs-3", "--weights", "bf16", "--isl", "1000",
                                 "--osl", "100", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["chips"] == 1 and d["tok_s_user"] > 0 and d["usd_per_mtok_output"] > 0
    r = CliRunner().invoke(app, ["capacity", "llama-3.1-70b", "--system", "cs-3", "--racks", "4", "--weights", "bf16",
                                 "--context", "8192", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["chips"] == 4 and d["max_streams"] >= 1 and d["units_needed"] == 4
