"""First-token time at the saturated end: what an engine's admission counts, and how many prompts share a pass.

TensorRT-LLM's attention-DP balance counts engine iterations, and an iteration that carries a prefill lasts
longer than a decode step; SGLang's scheduler poll counts decode steps only (a prefill makes it poll at
once). SGLang packs the prompts read at one poll into passes of its launch --chunked-prefill-size.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from lpxsim.engine import steady_state as ss
from lpxsim.gpu.step import GpuStepModel

MODEL = "deepseek-r1"


def test_an_engine_iteration_lasts_the_decode_step_stretched_by_the_prefill_share():
    assert ss.engine_iteration_s(0.02, 0.0) == pytest.approx(0.02)
    assert ss.engine_iteration_s(0.02, 0.5) == pytest.approx(0.04)  # half the time prefilling: twice as long
    assert ss.engine_iteration_s(0.02, 0.25) == pytest.approx(0.02 / 0.75)
    # a saturated prefill server is bounded, not infinite
    assert ss.engine_iteration_s(0.02, 1.0) == pytest.approx(0.02 / (1.0 - ss.MAX_PREFILL_BUSY))
    assert ss.engine_iteration_s(0.02, -0.1) == pytest.approx(0.02)


class _Poller:
    """A step that only polls (SGLang on Blackwell), or only holds (TensorRT-LLM attention-DP)."""

    def __init__(self, poll=None, hold=None):
        self.admission_poll, self.admission_hold = poll, hold


def test_the_poll_counts_decode_steps_and_the_hold_counts_iterations():
    poller = _Poller(poll=(16, 10, 30))
    # the poll's wait does not depend on how long prefill-carrying iterations are
    assert ss._admission_hold_s(poller, 64, 10.0, 0.02, iteration_s=0.05) == pytest.approx(15 * 0.02)
    holder = _Poller(hold=(4, 60, 1))
    sparse = 1e-3  # so few arrivals that every request waits the whole timeout (8 users: two a rank, all held)
    assert ss._admission_hold_s(holder, 8, 8.0 / sparse, 0.02) == pytest.approx(60 * 0.02, rel=0.02)
    assert ss._admission_hold_s(holder, 8, 8.0 / sparse, 0.02, iteration_s=0.05) == pytest.approx(
        60 * 0.05, rel=0.02)


def test_the_attention_dp_hold_releases_while_a_rank_runs_no_decode():
    """TensorRT-LLM releases held prefills at once while some rank has no generation request (TRT-ADP). The
    engine puts a new request on the rank with the fewest: at one stream a rank or fewer, the rank whose stream
    just ended is idle while its user's next request waits, so nothing is held; at two a rank, everything is."""
    assert ss.held_share(8, 1) == 0.0
    assert ss.held_share(8, 8) == 0.0
    assert ss.held_share(8, 12) == pytest.approx(2 * 4 / 12)
    assert ss.held_share(8, 16) == 1.0
    assert ss.held_share(8, 64) == 1.0
    dp = GpuStepModel(MODEL, "b200-hgx", tp=8, ep=8, dp_attention=True, weights="fp4", kv="fp8", framework="trtllm")
    one = ss.steady_state(dp, isl=922, osl=922, concurrency=1)
    dp.engine = replace(dp.engine, adp_balance_timeout_iters=0)
    assert one.ttft_s == pytest.approx(ss.steady_state(dp, isl=922, osl=922, concurrency=1).ttft_s, rel=1e-9)


def test_an_attention_dp_hold_lengthens_with_the_prefills_its_iterations_carry(monkeypatch):
    """8k prompts at 256 users on TensorRT-LLM attention-DP: a large share of the engine's time is prefill, so
    the 60 iterations of the hold last longer than 60 decode steps; the cycle's work does not change."""
    dp = GpuStepModel(MODEL, "b200-hgx", tp=4, ep=4, dp_attention=True, weights="fp4", kv="fp8",
                      framework="trtllm")
    counted = ss.steady_state(dp, isl=7373, osl=922, concurrency=256)
    monkeypatch.setattr(ss, "engine_iteration_s", lambda step_s, busy: step_s)
    as_decode_steps = ss.steady_state(dp, isl=7373, osl=922, concurrency=256)
    assert counted.ttft_wait_s > 1.2 * as_decode_steps.ttft_wait_s
    assert counted.e2e_s == pytest.approx(as_decode_steps.e2e_s, rel=0.02)  # the wait moves out of the decode phase
    # without a hold nothing changes
    monkeypatch.undo()
    dp.engine = replace(dp.engine, adp_balance_timeout_iters=0)
    free = ss.steady_state(dp, isl=7373, osl=922, concurrency=256)
    monkeypatch.setattr(ss, "engine_iteration_s", lambda step_s, busy: step_s)
    assert ss.steady_state(dp, isl=7373, osl=922, concurrency=256).ttft_s == pytest.approx(free.ttft_s, rel=1e-9)


def test_sglang_passes_pack_prompts_up_to_its_launch_chunked_prefill_size():
    """InferenceX launches SGLang on B200/B300 with --chunked-prefill-size 16,384 (FP4) and 32,768 / 8,192
    (FP8 at TP8 / TP4), on H200 with 32,768 and on MI325X / MI355X with 131,072 / 196,608 (FP8 at TP8; they do
    not poll, so only a benchmark's start-up burst packs by it); TensorRT-LLM's launches state none."""
    fp4 = GpuStepModel(MODEL, "b200-hgx", tp=4, ep=4, weights="fp4", kv="fp8", framework="sglang")
    assert fp4.prefill_pass_tokens == 16384
    assert GpuStepModel(MODEL, "b300-hgx", tp=8, weights="fp8", kv="fp8", framework="sglang").prefill_pass_tokens \
        == 32768
    assert GpuStepModel(MODEL, "b200-hgx", tp=4, weights="fp8", kv="fp8", framework="sglang").prefill_pass_tokens \
        == 8192
    assert GpuStepModel(MODEL, "h200-hgx", tp=8, weights="fp8", framework="sglang").prefill_pass_tokens == 32768
    assert GpuStepModel(MODEL, "mi325x", tp=8, weights="fp8", framework="sglang").prefill_pass_tokens == 131072
    assert GpuStepModel(MODEL, "mi355x", tp=8, weights="fp8", framework="sglang").prefill_pass_tokens == 196608
    assert GpuStepModel(MODEL, "mi355x", tp=4, weights="fp8", framework="sglang").prefill_pass_tokens is None
    assert GpuStepModel(MODEL, "gb200-nvl72", tp=8, weights="fp8", framework="sglang").prefill_pass_tokens is None
    assert GpuStepModel(MODEL, "b200-hgx", tp=8, weights="fp8", framework="trtllm").prefill_pass_tokens is None
    # 8k prompts at 128 users: a 16K pass holds a second prompt read at the same poll, an 8K one does not
    packed = ss.steady_state(fp4, isl=7373, osl=922, concurrency=128)
    fp4.engine = replace(fp4.engine, prefill_pass=())
    alone = ss.steady_state(fp4, isl=7373, osl=922, concurrency=128)
    _, occ = ss.prefill_cost(fp4, 7373)
    assert 0.3 * occ < packed.ttft_s - alone.ttft_s < 1.2 * occ  # one more prompt (and its queue feedback)
    assert packed.e2e_s == pytest.approx(alone.e2e_s, rel=0.02)  # the cycle's work is unchanged
