"""The steady-state estimate, as the planning layer offers it.

The math lives at the seam (`lpxsim.engine.steady_state`) because it needs nothing but
the StepModel protocol, so backends' layout searches may use it without a
back edge into `plan`.
"""

from lpxsim.engine.steady_state import (
    DEFAULT_PREFILL_CHUNK,
    MTP_DRAFT_FRACTION,
    Estimate,
    decode_period,
    expected_tokens_per_round,
    prefill_cost,
    steady_state,
)

__all__ = [
    "DEFAULT_PREFILL_CHUNK",
    "MTP_DRAFT_FRACTION",
    "Estimate",
    "decode_period",
    "expected_tokens_per_round",
    "prefill_cost",
    "steady_state",
]
