"""Speculative decoding per draft position (issue 28, item 4): acceptance profile, round cost, one code path."""

import random

import pytest

from lpxsim.core.errors import UserError
from lpxsim.specs.mtp import (
    DSV3_LENGTH_AT_7,
    accepted_drafts,
    decay_for_length,
    default_accept,
    profile,
    tokens_per_round,
)

MODEL = "deepseek-r1"


def test_default_profile_reproduces_its_two_sources():
    from lpxsim.catalog import get_model

    rates = default_accept(get_model(MODEL))
    drafts, length = DSV3_LENGTH_AT_7
    assert rates[0] == 0.85
    assert tokens_per_round(rates[:drafts]) == pytest.approx(length, abs=1e-6)
    # a flat 0.85 over-credits three drafts by ~12 %: the held-out MTP rows' over-credited speed-up
    assert tokens_per_round(profile(0.85, 3)) / tokens_per_round(rates[:3]) == pytest.approx(1.117, abs=0.005)


def test_tokens_per_round_is_the_closed_form_for_a_flat_rate():
    a, k = 0.7, 4
    assert tokens_per_round(profile(a, k)) == pytest.approx((1 - a ** (k + 1)) / (1 - a))
    assert tokens_per_round(()) == 1.0


def test_profile_extends_a_short_list_and_rejects_bad_rates():
    assert profile((0.9, 0.6), 4) == (0.9, 0.6, 0.6, 0.6)
    for bad in (1.0, -0.1, (0.5, 1.2), ()):
        with pytest.raises(UserError) as e:
            profile(bad, 3)
        assert e.value.field == "accept"


def test_decay_for_length_inverts_tokens_per_round():
    d = decay_for_length(0.9, 5, 3.0)
    assert tokens_per_round(tuple(0.9 * d**i for i in range(5))) == pytest.approx(3.0, abs=1e-9)
    with pytest.raises(UserError):
        decay_for_length(0.5, 3, 3.5)  # above the flat-rate ceiling


def test_simulator_draws_match_the_expectation():
    rates = (0.9, 0.7, 0.5)
    rng = random.Random(7)
    n = 40_000
    mean = sum(1 + accepted_drafts(rates, [rng.random() for _ in rates]) for _ in range(n)) / n
    assert mean == pytest.approx(tokens_per_round(rates), rel=0.01)


def test_a_rounds_drafts_judged_together_are_the_ones_judged_one_by_one(monkeypatch):
    """The MTP worker judges a round's sequences in one array (`MtpWorker._accepted_all`); the same draws in the
    same order judged one sequence at a time (`SpecWorker._accepted_all`) give the very same run."""
    from lpxsim.serving import simulate
    from lpxsim.serving.config import load_fleet
    from lpxsim.serving.mtp import MtpWorker
    from lpxsim.serving.spec import SpecWorker
    from lpxsim.serving.workload import benchmark_loop

    def run():
        fleet = load_fleet({"name": "mtp", "pools": [
            {"name": "b200", "system": "b200-hgx", "model": MODEL, "workers": 1, "gpus_per_worker": 8,
             "mtp": 3, "mtp_accept": [0.9, 0.7, 0.5]}]})
        return simulate(fleet, benchmark_loop(48, 512, 96, 3), seed=11).requests

    together = run()
    monkeypatch.setattr(MtpWorker, "_accepted_all", SpecWorker._accepted_all)
    one_by_one = run()
    cols = ["request_id", "first_token_s", "finish_s", "spec_rounds", "spec_accepted"]
    assert together[cols].equals(one_by_one[cols])
    assert together["spec_accepted"].sum() > 0 and (together["spec_accepted"] < 3 * together["spec_rounds"]).any()


def test_verify_streams_each_sequences_kv_once():
    """A verify step's GEMMs and MoE see batch x (k + 1) rows, but its MLA attention folds a sequence's k + 1
    query positions into the head dimension (FLASHMLA-SQ): the KV cache is streamed once per sequence, not
    k + 1 times as a decode of batch x (k + 1) sequences would."""
    from lpxsim.gpu.step import GpuStepModel
    from lpxsim.step.protocol import DecodeBatch

    m = GpuStepModel(MODEL, "h200", tp=8, weights="fp8", kv="bf16", framework="sglang")
    ops = m.source[0]
    for b in (4, 16):
        folded = ops.mla_verify(b, 8000, 16, 4, "bf16")  # 16 local heads x 4 positions: the 64-head row
        assert folded == pytest.approx(ops.mla("decode", b, 8000, 64, "bf16"), rel=1e-9)
        assert folded < 0.7 * ops.mla("decode", 4 * b, 8000, 16, "bf16")
        between = ops.mla_verify(b, 8000, 16, 3, "bf16")  # 48 rows: between the 32- and 64-head rows
        assert ops.mla("decode", b, 8000, 32, "bf16") <= between <= folded
        v = m.verify(DecodeBatch.uniform(b, 8000), 3).latency_s
        assert m.decode_step(DecodeBatch.uniform(b, 8000)).latency_s < v
        assert v < m.decode_step(DecodeBatch.uniform(4 * b, 8000)).latency_s
    # beyond the table's largest head count (128) the rows take extra passes, each streaming the KV again
    assert ops.mla_verify(4, 8000, 128, 3, "bf16") == pytest.approx(ops.mla("decode", 12, 8000, 128, "bf16"))


def test_mtp_round_adds_drafts_and_sglang_extra_passes_unless_overlapped():
    from dataclasses import replace

    from lpxsim.gpu.step import GpuStepModel
    from lpxsim.step.protocol import DecodeBatch
    from lpxsim.step.speculative import MTP_DRAFT_FRACTION, mtp_round_s

    batch = DecodeBatch.uniform(8, 2048)
    # SGLang's spec v2 (its default) overlaps the draft passes' host work; spec v1 pays a step's host time for
    # each of its two extra passes; TensorRT-LLM runs verify and drafts in one graph
    for fw, overlap, passes in (("sglang", True, 0), ("sglang", False, 2), ("trtllm", False, 0)):
        m = GpuStepModel(MODEL, "b200", tp=8, weights="fp8", kv="fp8", framework=fw)
        assert m.engine.spec_overlap == (fw == "sglang")
        m.engine = replace(m.engine, spec_overlap=overlap)
        v, d = m.verify(batch, 3).latency_s, m.decode_step(batch).latency_s
        want = v + MTP_DRAFT_FRACTION * (v + 2 * d) + passes * m.engine.step_overhead_s
        assert mtp_round_s(m, batch, 3) == pytest.approx(want, rel=1e-12)
        assert m.spec_round_overhead_s == pytest.approx(passes * m.engine.step_overhead_s)
    assert GpuStepModel(MODEL, "b200", tp=8, weights="fp8", kv="fp8").engine.spec_extra_passes == 2


def test_steady_state_uses_the_profile_and_shared_round():
    from lpxsim.catalog import get_model
    from lpxsim.engine.steady_state import steady_state
    from lpxsim.gpu.step import GpuStepModel

    m = GpuStepModel(MODEL, "b200", tp=8, weights="fp8", kv="fp8", framework="sglang")
    rates = default_accept(get_model(MODEL))
    base = steady_state(m, 1024, 1024, 4)
    prof = steady_state(m, 1024, 1024, 4, spec_k=3, spec_accept=rates)
    flat = steady_state(m, 1024, 1024, 4, spec_k=3, spec_accept=0.85)
    assert prof.tokens_per_round == pytest.approx(tokens_per_round(rates[:3]))
    assert prof.spec_accept == pytest.approx((prof.tokens_per_round - 1) / 3)
    assert flat.spec_accept == 0.85
    assert base.tpot_s > prof.tpot_s > flat.tpot_s
