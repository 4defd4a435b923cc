"""Steady-state estimate math, checked on a StepModel whose costs are known in closed form."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lpxsim.core.errors import UserError
from lpxsim.plan.estimate import expected_tokens_per_round, steady_state
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost, StepModel


@dataclass
class LinearStep:
    """Costs linear in batch and tokens; `stages` > 1 pipelines micro-batches like an LPX rack."""

    base_s: float = 1e-3
    per_seq_s: float = 1e-5
    per_prefill_token_s: float = 1e-6
    stages: int = 1
    capacity_bytes: float = 1e12
    bytes_per_token: float = 1e5

    name: str = "linear"
    chips: int = 8
    power_w: float = 10_000.0

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        lat = self.base_s + self.per_seq_s * batch.size
        return StepCost(lat, lat / self.stages)

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        lat = self.base_s + self.per_prefill_token_s * chunk.tokens * chunk.sequences
        return StepCost(lat, lat / self.stages)

    def verify(self, batch: DecodeBatch, k: int) -> StepCost:
        lat = self.base_s + self.per_seq_s * batch.size * (k + 1)
        return StepCost(lat, lat / self.stages)

    def kv_capacity_bytes(self) -> float:
        return self.capacity_bytes

    def kv_bytes(self, context: int) -> float:
        return self.bytes_per_token * context

    def max_batch(self) -> int:
        return 4096


def test_linear_step_satisfies_the_protocol() -> None:
    assert isinstance(LinearStep(), StepModel)


def test_single_user_ttft_and_tpot_are_the_step_costs() -> None:
    s = LinearStep()
    e = steady_state(s, isl=1000, osl=100, concurrency=1)
    assert e.ttft_s == pytest.approx(1e-3 + 1e-3)
    assert e.tpot_s == pytest.approx(1e-3 + 1e-5)
    assert e.tok_s_user == pytest.approx(1 / e.tpot_s)
    assert e.e2e_s == pytest.approx(e.ttft_s + 99 * e.tpot_s)
    assert e.tok_s_total == pytest.approx(100 / e.e2e_s)
    assert e.tok_s_per_mw == pytest.approx(e.tok_s_total / 0.01)


def test_long_prompts_are_chunked() -> None:
    s = LinearStep()
    e = steady_state(s, isl=20_000, osl=10, concurrency=1, prefill_chunk=8192)
    assert e.ttft_s == pytest.approx(3 * 1e-3 + 20_000 * 1e-6)


def test_more_concurrency_never_raises_per_user_speed() -> None:
    s = LinearStep()
    prev = float("inf")
    for c in (1, 2, 4, 8, 16, 64, 256):
        e = steady_state(s, isl=1000, osl=500, concurrency=c)
        assert e.tok_s_user <= prev + 1e-9
        prev = e.tok_s_user


def test_pipelined_backend_keeps_several_micro_batches_in_flight() -> None:
    flat = steady_state(LinearStep(stages=1), isl=1000, osl=500, concurrency=8)
    piped = steady_state(LinearStep(stages=8), isl=1000, osl=500, concurrency=8)
    assert piped.micro_batches > 1
    assert piped.tok_s_total > flat.tok_s_total
    one = steady_state(LinearStep(stages=8), isl=1000, osl=500, concurrency=1)
    assert one.micro_batches == 1 and one.tpot_s == pytest.approx(1e-3 + 1e-5)


def test_speculative_decoding_tokens_per_round() -> None:
    assert expected_tokens_per_round(3, 0.0) == pytest.approx(1.0)
    assert expected_tokens_per_round(3, 0.5) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    s = LinearStep()
    plain = steady_state(s, isl=1000, osl=500)
    spec = steady_state(s, isl=1000, osl=500, spec_k=3, spec_accept=0.8)
    assert spec.tok_s_user > 2 * plain.tok_s_user
    assert spec.tokens_per_round == pytest.approx(expected_tokens_per_round(3, 0.8))


def test_kv_overflow_names_concurrency() -> None:
    s = LinearStep(capacity_bytes=1e9)
    with pytest.raises(UserError) as e:
        steady_state(s, isl=100_000, osl=1000, concurrency=2)
    assert e.value.field == "concurrency"


@pytest.mark.parametrize(("field", "kwargs"), [("isl", {"isl": 0}), ("osl", {"osl": -1}), ("concurrency", {"concurrency": 0})])
def test_bad_input(field: str, kwargs: dict) -> None:
    args = {"isl": 100, "osl": 10, "concurrency": 1} | kwargs
    with pytest.raises(UserError) as e:
        steady_state(LinearStep(), **args)
    assert e.value.field == field
