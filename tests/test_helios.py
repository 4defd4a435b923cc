"""AMD Helios: a 72 x MI455X rack-scale GPU system the GPU model can price."""

from __future__ import annotations

import pytest

from lpxsim.backends import Layout, make_step_model
from lpxsim.catalog import get_system
from lpxsim.plan.costs import default_costs
from lpxsim.stepmodel import DecodeBatch


def test_helios_rack_arithmetic_matches_amds_rack_figures():
    s = get_system("helios")
    assert s.chips_per_unit == 72 and not s.is_lpu and not s.is_wafer
    pub = {k: float(v) for k, v in s.published.items()}
    assert s.memory_bytes() == pytest.approx(pub["hbm_bytes"], rel=0.01)
    assert s.memory_bw_Bps() == pytest.approx(pub["hbm_bw_Bps"], rel=0.01)
    assert s.peak_flops("fp4") == pytest.approx(pub["fp4_flops"], rel=0.01)
    assert s.peak_flops("fp8") == pytest.approx(pub["fp8_flops"], rel=0.03)
    assert s.scale_up_bidir_Bps(line_rate=True) == pytest.approx(pub["scale_up_Bps"], rel=0.01)
    assert s.power_w.grade == "U" and s.chip.power_w.grade == "U"
    assert get_system("amd-helios").name == "helios"
    assert default_costs().capex("helios") is not None


def test_gpu_model_prices_helios_faster_than_mi355x_at_equal_layout():
    batch = DecodeBatch.uniform(8, 8000)
    helios = make_step_model("llama-3.1-70b", "helios", Layout(gpus=8, tp=8)).decode_step(batch)
    mi355 = make_step_model("llama-3.1-70b", "mi355x", Layout(gpus=8, tp=8)).decode_step(batch)
    assert 0 < helios.latency_s < mi355.latency_s  # 19.6 vs 8 TB/s of HBM per GPU
