"""AMD's own measured GEMM times (aiter's and hipBLASLt's tuning tables) in place of a projected NVIDIA sibling's."""

import csv
from importlib import resources

import pytest

from lpxsim.catalog import get_system
from lpxsim.gpu.amd_kernels import (
    GEMM_FILE,
    TENSOR_GEMM_FILE,
    fp8_block_gemm_s,
    fp8_block_moe_s,
    fp8_tensor_gemm_s,
    has_tables,
)
from lpxsim.gpu.measured import measured_ops
from lpxsim.gpu.step import GpuStepModel
from lpxsim.step.protocol import DecodeBatch


def _rows() -> list[dict]:
    with resources.files("lpxsim").joinpath("data", "measured", GEMM_FILE).open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_measured_shape_is_its_row():
    rows = [r for r in _rows() if (r["cu_num"], r["m"], r["n"], r["k"]) == ("304", "64", "1536", "7168")]
    assert len(rows) == 1
    assert fp8_block_gemm_s(get_system("mi300x"), 64, 1536, 7168) == pytest.approx(float(rows[0]["us"]) * 1e-6)


def test_small_m_sits_on_the_floor_and_large_m_grows():
    mi = get_system("mi300x")
    below = fp8_block_gemm_s(mi, 1, 1536, 7168)
    assert below == fp8_block_gemm_s(mi, 16, 1536, 7168)  # the smallest measured M
    ts = [fp8_block_gemm_s(mi, m, 1536, 7168) for m in (16, 300, 3000, 20480, 40000)]
    assert ts[-1] > ts[-2] > ts[1] > 0.0
    between = fp8_block_gemm_s(mi, 3000, 1536, 7168)
    assert fp8_block_gemm_s(mi, 2048, 1536, 7168) < between < fp8_block_gemm_s(mi, 4096, 1536, 7168)


def test_an_unmeasured_n_of_a_measured_k_takes_the_nearest_plus_its_extra_work():
    mi = get_system("mi300x")
    # q_a + kv_a fused (N 2,112) below the M its own rows start at: the 1,536 row plus 576 more columns
    fused = fp8_block_gemm_s(mi, 16, 2112, 7168)
    assert fp8_block_gemm_s(mi, 16, 1536, 7168) < fused < fp8_block_gemm_s(mi, 16, 1536, 7168) * 1.2


def test_nvidia_gpus_and_unknown_k_have_no_rows():
    assert not has_tables(get_system("h200-hgx"))
    assert fp8_block_gemm_s(get_system("h200-hgx"), 64, 1536, 7168) is None
    assert fp8_block_gemm_s(get_system("mi300x"), 64, 4096, 4096) is None
    assert has_tables(get_system("mi325x")) and has_tables(get_system("mi355x"))


def test_amd_k7168_floor_is_above_the_projected_sibling_and_prices_the_step():
    mi = get_system("mi300x")
    h200 = measured_ops("h200_sxm", "sglang").gemm(8, 1536, 7168, "fp8_block")
    assert fp8_block_gemm_s(mi, 8, 1536, 7168) > 1.4 * h200  # the K-loop floor a rate ratio cannot give
    m = GpuStepModel("deepseek-r1", "mi300x", tp=8, weights="fp8")
    m.decode_step(DecodeBatch.uniform(1, 2000))
    assert m.cost_sources["gemm"].startswith("measured: AMD aiter tuning tables")


def test_fused_moe_rows_include_the_shared_expert_and_replace_its_gemms():
    mi355 = get_system("mi355x")
    # DeepSeek's 256 routed experts, top-8, TP8 (local intermediate 256): the table's rows are 257 / top-9
    t, shared = fp8_block_moe_s(mi355, 64, 7168, 256, 8, 256)
    assert shared and 150e-6 < t < 300e-6
    assert fp8_block_moe_s(mi355, 1, 7168, 256, 8, 256)[0] < t < fp8_block_moe_s(mi355, 1024, 7168, 256, 8, 256)[0]
    assert fp8_block_moe_s(get_system("mi300x"), 64, 7168, 256, 8, 256) is None  # no cu-304 rows: projected
    m = GpuStepModel("deepseek-r1", "mi355x", tp=8, weights="fp8")
    f = m._get("decode", 1, (2000,) * 8)
    from lpxsim.gpu.compose import price_measured

    price_measured(m, f, "decode", 1, 2000.0, True)
    assert m.cost_sources["moe"].startswith("measured: AMD aiter tuning tables")
    mi300 = GpuStepModel("deepseek-r1", "mi300x", tp=8, weights="fp8")
    mi300.decode_step(DecodeBatch.uniform(8, 2000))
    assert "projected (grade E)" in mi300.cost_sources["moe"]


def _tensor_rows() -> list[dict]:
    with resources.files("lpxsim").joinpath("data", "measured", TENSOR_GEMM_FILE).open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_hipblaslt_rows_agree_with_their_own_gflops():
    # the transcription check: each row's time and size give the GFLOP/s the tuning file printed beside them
    rows = _tensor_rows()
    assert len(rows) > 400
    for r in rows:
        m, n, k, us = int(r["m"]), int(r["n"]), int(r["k"]), float(r["us"])
        assert 2.0 * m * n * k / us / 1e3 == pytest.approx(float(r["gflops"]), rel=2e-3), r
    assert {(int(r["n"]), int(r["k"])) for r in rows} == {(10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672)}


def test_a_measured_tensor_gemm_is_its_row_and_others_are_left_to_the_projection():
    mi = get_system("mi300x")
    row = next(r for r in _tensor_rows() if (r["m"], r["n"], r["k"]) == ("64", "10240", "8192"))
    assert fp8_tensor_gemm_s(mi, 64, 10240, 8192) == pytest.approx(float(row["us"]) * 1e-6)
    # between measured sizes linear, beyond the largest it keeps growing
    lo, hi = fp8_tensor_gemm_s(mi, 256, 10240, 8192), fp8_tensor_gemm_s(mi, 272, 10240, 8192)
    assert lo <= fp8_tensor_gemm_s(mi, 264, 10240, 8192) <= hi
    assert fp8_tensor_gemm_s(mi, 8192, 10240, 8192) > 2.5 * fp8_tensor_gemm_s(mi, 2592, 10240, 8192)
    # a tensor-parallel slice was not measured: no row, no neighbour's time
    assert fp8_tensor_gemm_s(mi, 64, 5120, 8192) is None
    assert fp8_tensor_gemm_s(get_system("h200-hgx"), 64, 10240, 8192) is None
    assert fp8_tensor_gemm_s(get_system("mi355x"), 64, 10240, 8192) is None  # other silicon (256 CUs)


def test_a_table_time_is_not_faster_than_the_gpus_sustained_matmul_rate():
    """The tuner timed its kernels in short runs; a dense GEMM under the board's power limit runs at AMD's
    max-achievable rate (AMD-MAF): MI300X (750 W) is floored there, MI325X (1,000 W, a 19 % higher clock)
    keeps the measured row."""
    row = next(r for r in _tensor_rows() if (r["m"], r["n"], r["k"]) == ("1536", "10240", "8192"))
    table_s, flops = float(row["us"]) * 1e-6, 2.0 * 1536 * 10240 * 8192
    mi300, mi325 = get_system("mi300x"), get_system("mi325x")
    assert flops / 1.273e15 > table_s  # the row is faster than MI300X sustains
    assert fp8_tensor_gemm_s(mi300, 1536, 10240, 8192) == pytest.approx(flops / 1.273e15)
    assert fp8_tensor_gemm_s(mi325, 1536, 10240, 8192) == pytest.approx(table_s)
    assert fp8_block_gemm_s(mi300, 20480, 1536, 7168) >= 2.0 * 20480 * 1536 * 7168 / 1.273e15


def test_a_dense_fp8_step_on_mi300x_names_the_hipblaslt_table():
    m = GpuStepModel("llama-2-70b", "mi300x", tp=1, weights="fp8", kv="fp8", framework="vllm")
    m.decode_step(DecodeBatch.uniform(512, 400))
    assert m.cost_sources["gemm"].startswith("measured: AMD hipBLASLt tuning table")
    # at a tensor-parallel size the table did not measure, the GEMMs stay projected
    m8 = GpuStepModel("llama-2-70b", "mi300x", tp=8, weights="fp8", kv="fp8", framework="vllm")
    m8.decode_step(DecodeBatch.uniform(512, 400))
    assert m8.cost_sources["gemm"].startswith("projected")
