"""The op graph: lower a model and a phase (decode step, prefill chunk, verification) into ops."""

from lpxsim.graph.lower import expected_experts_touched, lower
from lpxsim.graph.ops import Op, OpGraph, Phase

__all__ = ["Op", "OpGraph", "Phase", "expected_experts_touched", "lower"]
