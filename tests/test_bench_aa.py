"""AA methodology: the per-request metric, statistics, token conversion, published comparison."""

from __future__ import annotations

import math

import pytest

from lpxsim.bench.aa import AASetup, RequestTiming, aa_output_speed, run_aa_on_step
from lpxsim.bench.published import PUBLISHED, lookup
from lpxsim.bench.stats import pct_diff, summarize
from lpxsim.bench.tokens import TokenConversion, count_o200k, measure_ratio
from lpxsim.core.errors import UserError
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost


class LinearStep:
    """A toy backend with closed-form costs: decode = a + b x context, prefill = c x tokens."""

    name, chips, power_w = "toy", 4, 10_000.0

    def __init__(self, a=2e-4, b=0.0, c=1e-6, pipeline=1.0):
        self.a, self.b, self.c, self.pipeline = a, b, c, pipeline

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        return StepCost.serial(self.a + self.b * max(batch.contexts))

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        lat = self.c * chunk.tokens
        return StepCost(lat, lat * self.pipeline)

    def verify(self, batch, k):
        return self.decode_step(batch)

    def kv_capacity_bytes(self):
        return 1e12

    def kv_bytes(self, context):
        return 1e3 * context

    def max_batch(self):
        return 64


def test_constant_decode_gives_exact_speed_for_every_request():
    setup = AASetup(contexts=(10_000,), requests=9, seed=3)
    points, per_req = run_aa_on_step(LinearStep(a=1 / 4000), "toy-model", "toy", setup)
    (p,) = points
    assert p.output_speed["median"] == pytest.approx(4000.0, rel=1e-9)
    assert p.output_speed["p5"] == pytest.approx(4000.0, rel=1e-9)
    assert per_req["output_speed"].to_numpy() == pytest.approx(4000.0, rel=1e-9)
    assert p.ttft_s["median"] == pytest.approx(10_000 * 1e-6)
    assert p.concurrency == 1 and p.context == 10_000 and p.published is None and p.diff_pct is None


def test_speed_falls_with_context_when_decode_grows_with_context():
    setup = AASetup(contexts=(10_000, 100_000), requests=5)
    points, _ = run_aa_on_step(LinearStep(a=1e-4, b=1e-9), "toy-model", "toy", setup)
    assert points[0].output_speed["median"] > points[1].output_speed["median"]
    # at 10K the decode step is ~1e-4 + 1e-5 s: speed near 1 / 1.1e-4
    assert points[0].output_speed["median"] == pytest.approx(1 / 1.105e-4, rel=0.01)


def test_longer_answers_are_slower_per_token_when_context_matters():
    setup = AASetup(contexts=(10_000,), requests=32, output_sigma=0.8)
    _, per_req = run_aa_on_step(LinearStep(a=1e-4, b=1e-8), "m", "toy", setup)
    corr = per_req["native_output_tokens"].corr(per_req["output_speed"])
    assert corr < -0.9
    assert per_req["output_speed"].nunique() > 1


def test_pipelined_prefill_chunks_overlap():
    # interval = 0.5 x latency: chunk i enters half a chunk-latency after chunk i-1
    setup = AASetup(contexts=(16_384,), requests=1, prefill_chunk=8192)
    points, _ = run_aa_on_step(LinearStep(c=1e-6, pipeline=0.5), "m", "toy", setup)
    assert points[0].ttft_s["median"] == pytest.approx(8192e-6 * 0.5 + 8192e-6)


def test_token_ratio_scales_speed_and_context():
    conv = TokenConversion(1.25)
    setup = AASetup(contexts=(10_000,), requests=3, conversion=conv)
    (p,), _ = run_aa_on_step(LinearStep(a=1 / 1000), "m", "toy", setup)
    assert p.native_context == 8000
    assert p.output_speed["median"] == pytest.approx(1250.0, rel=1e-3)


def test_aa_metric_excludes_the_first_chunk():
    t = RequestTiming(input_tokens=10, output_tokens=101, ttft_s=1.0, last_token_s=2.0, first_chunk_tokens=1)
    assert aa_output_speed(t, TokenConversion()) == pytest.approx(100.0)
    one = RequestTiming(10, 1, 1.0, 1.0, 1)
    assert math.isnan(aa_output_speed(one, TokenConversion()))


def test_deterministic_under_a_seed_and_varies_with_it():
    a = AASetup(requests=8, seed=7).output_lengths()
    b = AASetup(requests=8, seed=7).output_lengths()
    c = AASetup(requests=8, seed=8).output_lengths()
    assert (a == b).all() and not (a == c).all()
    assert a.min() >= 64 and a.max() <= 4096


def test_summary_statistics():
    s = summarize(list(range(1, 102)))
    assert s["median"] == 51 and s["p5"] == 6 and s["p95"] == 96 and s["n"] == 101
    assert pct_diff(103.0, 100.0) == pytest.approx(3.0)


def test_published_figures_are_only_a_lookup_table():
    assert lookup("gemma-4-31b", "lpx", "aa_output_speed_median", 10_000).value == 3382.0
    assert lookup("gemma-4-31b", "lpx", "aa_output_speed_median", 100_000).id == "T2"
    assert lookup("gemma-4-31b", "vr-nvl72", "aa_output_speed_median", 10_000) is None
    assert len({p.id for p in PUBLISHED}) == len(PUBLISHED)


def test_published_figures_feed_only_the_comparison_column():
    setup = AASetup(contexts=(10_000,), requests=3)
    (p,), _ = run_aa_on_step(LinearStep(a=1 / 3000), "gemma-4-31b", "lpx", setup)
    assert p.published.id == "T1"
    assert p.output_speed["median"] == pytest.approx(3000.0)
    assert p.diff_pct == pytest.approx(100 * (3000 - 3382) / 3382)


def test_o200k_counts_offline():
    assert count_o200k("Hello world") == 2
    assert count_o200k("<|endoftext|>") > 1  # special strings are plain text here
    assert measure_ratio("Hello world", 4) == pytest.approx(0.5)


def test_bad_setup_is_a_user_error():
    with pytest.raises(UserError, match="requests"):
        AASetup(requests=0)
    with pytest.raises(UserError, match="contexts"):
        AASetup(contexts=(0,))
    for ratio in (0.0, 1e-300, 0.05, 11.0):
        with pytest.raises(UserError, match="token-ratio"):
            TokenConversion(ratio)


class CurvedStep(LinearStep):
    """Decode cost with curvature in the context, to bound the stride interpolation's error."""

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        c = max(batch.contexts)
        return StepCost.serial(1e-4 + 1e-9 * c + 1e-16 * c * c)


def test_decode_stride_is_exact_for_affine_costs_and_close_otherwise():
    affine = AASetup(contexts=(10_000,), requests=4, decode_stride=1)
    strided = AASetup(contexts=(10_000,), requests=4, decode_stride=64)
    a, _ = run_aa_on_step(LinearStep(a=1e-4, b=1e-9), "m", "toy", affine)
    b, _ = run_aa_on_step(LinearStep(a=1e-4, b=1e-9), "m", "toy", strided)
    assert b[0].output_speed["median"] == pytest.approx(a[0].output_speed["median"], rel=1e-12)
    c, _ = run_aa_on_step(CurvedStep(), "m", "toy", affine)
    d, _ = run_aa_on_step(CurvedStep(), "m", "toy", strided)
    assert d[0].output_speed["median"] == pytest.approx(c[0].output_speed["median"], rel=1e-6)


def test_decode_is_evaluated_on_the_grid_only():
    calls = []

    class Counting(LinearStep):
        def decode_step(self, batch):
            calls.append(batch.contexts[0])
            return super().decode_step(batch)

    run_aa_on_step(Counting(), "m", "toy", AASetup(contexts=(10_000,), requests=4, decode_stride=64))
    assert all(c % 64 == 0 for c in calls) and len(calls) == len(set(calls))


def test_prompt_file_context_is_its_o200k_length(tmp_path):
    from lpxsim.bench.tokens import count_file

    p = tmp_path / "prompt.txt"
    p.write_text("Hello world " * 100, encoding="utf-8")
    assert count_file(p) == count_o200k("Hello world " * 100)
    with pytest.raises(UserError, match="prompt-file"):
        count_file(tmp_path / "missing.txt")
