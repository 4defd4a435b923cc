"""Speculative decoding on one LPX rack: Gemma 4's assistant (MTP) drafter + target verification.

The drafter's published dimensions (models.md, VLLM-SCRIPTS, grade S): 4 layers,
hidden 1024, fed the target's last hidden state (width 5376). Everything else
is an assumption, stated in docs/assumptions.md ("LPX compiler ..."): 8 query
heads x 128, 2 KV heads, gated-GELU MLP of 4 x 1024, Gemma's sliding/global
pattern truncated to 4 layers (3 sliding of window 1024, last global), the
target's 262,144-token vocabulary with a tied 1024-wide embedding. The input
projection [embedding | target hidden] -> 1024 (6.5 M parameters) is not in
the op graph; its read (6.5 MB FP8, ~43 ns of one chip's SRAM sweep) and the
5376-wide hand-over (one C2C hop) are added to each drafter step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lpxsim.specs.model import ModelSpec

DRAFTER_CONFIG = {
    "model_type": "gemma3_text", "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 4,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 262_144,
    "sliding_window": 1024,
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
    "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True, "rms_norm_eps": 1e-6,
    "max_position_embeddings": 262_144, "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 128,
}
BACKBONE_HIDDEN = 5376
INPUT_PROJ_PARAMS = (BACKBONE_HIDDEN + 1024) * 1024


def gemma4_assistant() -> ModelSpec:
    """ModelSpec of the Gemma 4 31B assistant drafter, from the published dims + stated assumptions."""
    return ModelSpec.from_config(dict(DRAFTER_CONFIG), name="gemma-4-31b-assistant", source="lpxsim.lpu.speculative")


def tokens_per_round(k: int, accept: float) -> float:
    """Expected tokens emitted per draft-and-verify round (k drafts, i.i.d. acceptance `accept`, + bonus)."""
    if accept >= 1.0:
        return k + 1.0
    return (1.0 - accept ** (k + 1)) / (1.0 - accept)


@dataclass(frozen=True)
class SpecPoint:
    k: int
    draft_step_s: float
    verify_s: float
    round_s: float
    accept_needed: float | None  # None when even perfect acceptance cannot reach the target
    tokens_per_round: float


def acceptance_needed(target_tok_s: float, k: int, draft_step_s: float, verify_s: float) -> SpecPoint:
    """Acceptance rate that makes k-token speculation reach `target_tok_s` for one user.

    An inversion, not a prediction: the rate is solved from the target speed (T7 in docs/validation.md);
    only the draft and verify times are lpxsim's own. Compare it with an independently measured acceptance
    before calling the target explained."""
    round_s = k * draft_step_s + verify_s
    need_tokens = target_tok_s * round_s
    if need_tokens > k + 1:
        return SpecPoint(k, draft_step_s, verify_s, round_s, None, need_tokens)
    lo, hi = 0.0, 1.0
    for _ in range(60):  # bisection: tokens_per_round is increasing in accept
        mid = (lo + hi) / 2
        if tokens_per_round(k, mid) < need_tokens:
            lo = mid
        else:
            hi = mid
    return SpecPoint(k, draft_step_s, verify_s, round_s, hi, need_tokens)


def drafter_overhead_s(clock_hz: float, mem_bytes_per_cycle: float, hop_s: float) -> float:
    """Input projection read + the target hidden state's hop to the drafter, per drafter step."""
    return INPUT_PROJ_PARAMS / mem_bytes_per_cycle / clock_hz + hop_s


def best_k(points: list[SpecPoint]) -> SpecPoint:
    ok = [p for p in points if p.accept_needed is not None]
    return min(ok, key=lambda p: p.accept_needed) if ok else points[-1]


__all__ = ["SpecPoint", "acceptance_needed", "best_k", "drafter_overhead_s", "gemma4_assistant", "math",
           "tokens_per_round"]
