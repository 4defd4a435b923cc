"""Served per-user speed of a pipelined deployment (lpxsim.lpu.served)."""

from __future__ import annotations

import pytest

from lpxsim.core.errors import UserError
from lpxsim.lpu.served import full_pipeline_tok_s_user, served_period_s, served_tok_s_user


def test_batch_one_is_the_latency_and_load_is_the_interval() -> None:
    assert served_tok_s_user(1e-3, 1e-4, 1) == pytest.approx(1000.0)
    assert served_period_s(1e-3, 1e-4, 5) == pytest.approx(1e-3)  # pipeline not yet full: latency bound
    assert served_period_s(1e-3, 1e-4, 15) == pytest.approx(1.5e-3)  # beyond it: every user waits its turn
    assert served_tok_s_user(1e-3, 1e-4, 30) < served_tok_s_user(1e-3, 1e-4, 15)


@pytest.mark.parametrize("args", [(1e-3, 1e-4, 0.5), (0.0, 1e-4, 2), (1e-3, -1.0, 2)])
def test_bad_input_is_one_user_error(args) -> None:
    with pytest.raises(UserError):
        served_period_s(*args)


def test_a_full_pipeline_gives_each_user_one_slot_per_round() -> None:
    # 24 stages of 139 us: each user waits for 23 others at the busiest stage
    assert full_pipeline_tok_s_user(2.0e-3, 139e-6, 24) == pytest.approx(1 / (24 * 139e-6))
    assert full_pipeline_tok_s_user(2.0e-3, 10e-6, 4) == pytest.approx(500.0)  # latency-bound: shallow pipeline
