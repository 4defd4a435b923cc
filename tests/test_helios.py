"""AMD Helios: a 72 x MI455X rack-scale GPU system the GPU model can price."""

from __future__ import annotations

import pytest

from lpxsim.backends.factory import Layout, make_step_model
from lpxsim.catalog import get_system
from lpxsim.plan.costs import default_costs
from lpxsim.step.protocol import DecodeBatch


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


def test_helios_is_priced_by_projection_from_a_measured_sibling():
    m = make_step_model("llama-3.1-70b", "helios", Layout(gpus=8, tp=8))
    assert m.decode_step(DecodeBatch.uniform(8, 8000)).latency_s > 0
    assert all("projected (grade E)" in v for k, v in m.cost_sources.items() if k in ("gemm", "attention"))


def test_projected_from_one_sibling_helios_is_faster_than_mi355x():
    """The spec ratios alone (19.6 vs 8 TB/s of HBM per GPU, more FLOPs): both projected from the same
    measured GPU. (Each system's default sibling differs: Helios's, GB300, has a measured sglang all-reduce
    about 3.6x slower than GB200's at 128 KB, which docs/validation.md records.)"""
    from lpxsim.gpu import GpuStepModel

    batch = DecodeBatch.uniform(8, 8000)
    helios = GpuStepModel("llama-3.1-70b", system="helios", gpus=8, tp=8, project_from="b200-hgx")
    mi355 = GpuStepModel("llama-3.1-70b", system="mi355x", gpus=8, tp=8, project_from="b200-hgx")
    assert 0 < helios.decode_step(batch).latency_s < mi355.decode_step(batch).latency_s
