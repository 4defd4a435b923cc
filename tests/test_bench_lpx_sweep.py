"""The LPX sweep reaches past concurrency 1: a replica compiled for a workload (its contexts, its streams).

Fast cases use the tiny Llama on 8 small-SRAM chips; the heavy case runs Gemma 4 31B on one LPX rack.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lpxsim.bench.sweep import kv_ceiling
from lpxsim.engine.steady_state import steady_state
from lpxsim.graph import Phase
from lpxsim.lpu import LpxStepModel
from lpxsim.specs.model import ModelSpec
from lpxsim.step.protocol import DecodeBatch

DATA = Path(__file__).parent / "data" / "emulate"
ISL, OSL = 2_000, 256


@pytest.fixture(scope="module")
def sm() -> LpxStepModel:
    m = ModelSpec.from_path(DATA / "llama_tiny.json")
    return LpxStepModel(m, chips=8, weights="bf16", context=ISL + OSL, concurrency=4, chip_sram_bytes=2_000_000,
                        context_grid=(ISL + OSL // 2,))


def test_workload_grid_is_the_workload_contexts(sm: LpxStepModel) -> None:
    assert sm._grid == (0, 1024, ISL + OSL // 2, ISL + OSL)
    got = sm.decode_step(DecodeBatch.uniform(2, ISL + OSL // 2))
    direct = sm.compile(Phase.decode([ISL + OSL // 2] * 2)).timing
    assert got.latency_s == pytest.approx(direct.latency_s, rel=1e-12)  # compiled there, not interpolated
    decode_ctx = {k[1][0] for k in sm._cache if k[0] == "decode"}
    assert decode_ctx <= {ISL + OSL // 2, ISL + OSL}  # no generic context bucket was compiled


def test_a_layouts_workload_grid_is_the_whole_request() -> None:
    """`Layout.workload_grid` names the mean context and the whole request (the step model adds 0 and 1,024)."""
    from lpxsim.backends.factory import Layout, _workload_grid

    assert _workload_grid(Layout(isl=ISL, osl=OSL, workload_grid=True)) == (ISL + OSL // 2, ISL + OSL)
    assert _workload_grid(Layout(isl=ISL, osl=OSL)) is None


def test_a_workload_grid_replicas_memo_table_names_its_grid(monkeypatch) -> None:
    """The grid decides the answers, and the memo table's key covers lpxsim.lpu but not backends.py: the
    grid is part of the replica's identity, so a warm cache never answers a new grid rule from old tables."""
    import lpxsim.backends.memo as stepmemo
    from lpxsim.backends.factory import Layout, make_step_model

    seen = []
    monkeypatch.setattr(stepmemo, "memoized", lambda build, identity: seen.append(identity))
    make_step_model("gemma-4-31b", "lpx", Layout(racks=1.0, isl=ISL, osl=OSL, workload_grid=True))
    make_step_model("gemma-4-31b", "lpx", Layout(racks=1.0, isl=ISL, osl=OSL))
    assert seen[0][-1] == ("context_grid", (ISL + OSL // 2, ISL + OSL)) and len(seen[0]) == len(seen[1]) + 1
    assert seen[1][-1] == "separate"  # no grid of its own: the identity as before


def test_a_replica_laid_out_for_the_request_keeps_its_end_alone() -> None:
    """On a replica whose target is the request's end the mean is not a grid point (a sweep point and a serving
    run of the workload share every compile); on a longer one the mean is compiled exactly (one decode compile
    for a steady-state estimate)."""
    m = ModelSpec.from_path(DATA / "llama_tiny.json")
    grid = (ISL + OSL // 2, ISL + OSL)
    exact = LpxStepModel(m, chips=8, weights="bf16", context=ISL + OSL, concurrency=4, chip_sram_bytes=2_000_000,
                         context_grid=grid)
    assert exact.target.context == ISL + OSL and exact._grid == (0, 1024, ISL + OSL)
    longer = LpxStepModel(m, chips=8, weights="bf16", context=4096, concurrency=1, chip_sram_bytes=2_000_000,
                          context_grid=grid)
    assert longer.target.context == 4096 and longer._grid == (0, 1024, *grid, 4096)
    longer.decode_step(DecodeBatch.uniform(1, ISL + OSL // 2))
    assert {k[1][0] for k in longer._summaries if k[0] == "decode"} == {ISL + OSL // 2, 4096}


def test_decode_at_the_mean_context_from_the_whole_request_grid() -> None:
    """On the (0, 1,024, isl + osl) grid the steady state's mean context is priced from compiles at 1,024 and
    isl + osl (a batch re-timed down by batch 1's checked slope), within 0.5 % of a direct compile there."""
    m = ModelSpec.from_path(DATA / "llama_tiny.json")
    top = LpxStepModel(m, chips=8, weights="bf16", context=ISL + OSL, concurrency=4, chip_sram_bytes=2_000_000,
                       context_grid=(ISL + OSL,))
    assert top._grid == (0, 1024, ISL + OSL)
    for b in (1, 2, 4, top.max_batch()):
        got = top.decode_step(DecodeBatch.uniform(b, ISL + OSL // 2))
        direct = top.compile(Phase.decode([ISL + OSL // 2] * b)).timing
        assert got.latency_s == pytest.approx(direct.latency_s, rel=0.005)
        assert got.interval_s == pytest.approx(direct.interval_s, rel=0.005)


@pytest.mark.parametrize(("mid", "rows"), [(1_500, 64), (1_900, 64), (1_500, 256), (2_000, 256)])
def test_prefill_between_workload_contexts_matches_direct_compile(sm: LpxStepModel, mid: int, rows: int) -> None:
    got = sm._cost("prefill", 1, mid, rows)
    direct = sm.compile(Phase("prefill", (mid,), rows)).timing
    assert got.latency_s == pytest.approx(direct.latency_s, rel=0.02)
    assert got.interval_s == pytest.approx(direct.interval_s, rel=0.02)


def test_replica_sized_for_streams_runs_up_to_its_ceiling(sm: LpxStepModel) -> None:
    ceiling = kv_ceiling(sm, ISL + OSL)
    assert ceiling > 4  # laid out for 4 streams, it holds at least those
    pts = [steady_state(sm, isl=ISL, osl=OSL, concurrency=c) for c in (1, 2, 4, ceiling)]
    users = [p.tok_s_user for p in pts]
    totals = [p.tok_s_total for p in pts]
    assert users == sorted(users, reverse=True) and users[0] > users[-1]
    assert totals == sorted(totals) and totals[-1] > 2 * totals[0]


def test_a_batch_bucket_the_replica_cannot_hold_is_not_compiled(sm: LpxStepModel) -> None:
    b = sm.max_batch()
    assert b > 4 and b & (b - 1)  # not a power of two: its bucket is larger than the replica holds
    cost = sm.decode_step(DecodeBatch.uniform(b, ISL + OSL // 2))
    direct = sm.compile(Phase.decode([ISL + OSL // 2] * b)).timing
    assert cost.latency_s == pytest.approx(direct.latency_s, rel=1e-12)
    bucket = 1 << (b - 1).bit_length()
    assert not any(k[0] == "decode" and len(k[1]) == bucket for k in sm._cache)


@pytest.mark.heavy
def test_gemma_on_one_lpx_rack_sweeps_past_concurrency_one() -> None:
    from lpxsim.bench.sweep import evaluate_point

    base = {"model": "gemma-4-31b", "target": "lpx", "context": 10_000, "osl": 1024, "weights": "fp8", "kv": "bf16"}
    rows = [evaluate_point({**base, "concurrency": c}) for c in (1, 8, 0)]
    one, eight, ceil = rows
    assert all(r["fits"] and "256 chips" in r["hardware"] for r in rows)
    assert ceil["at_ceiling"] and ceil["concurrency"] == ceil["kv_ceiling"] > 8
    assert ceil["kv_ceiling"] <= ceil["capacity_ceiling"]  # the compiled replica holds no more than the model says
    assert one["tok_s_user"] > eight["tok_s_user"] > ceil["tok_s_user"]
    assert one["tok_s_total"] < eight["tok_s_total"] < ceil["tok_s_total"]
    assert not math.isnan(ceil["tok_s_per_mw"])
