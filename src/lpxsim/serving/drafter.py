"""The Gemma 4 assistant drafter as a small ModelSpec built in code.

Published: a 4-layer assistant with hidden size 1024 that consumes the target's
hidden states (shared reference models.md / targets.md T7). Not published, and
assumed here (docs/assumptions.md "Serving simulator"): 8 query heads and 2 KV
heads of dimension 128, a gated MLP 4x wide (4096), full attention, and the
target's vocabulary (262,144) with tied embeddings, so the output projection
dominates its weight bytes (~0.27 B of its ~0.34 B parameters).
"""

from __future__ import annotations

from functools import cache

from lpxsim.specs.model import ModelSpec

GEMMA4_ASSISTANT_CONFIG = {
    "model_type": "llama",
    "hidden_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "intermediate_size": 4096,
    "vocab_size": 262144,
    "tie_word_embeddings": True,
    "max_position_embeddings": 262144,
    "hidden_act": "gelu_pytorch_tanh",
}

DRAFTER_NAMES = ("gemma-4-assistant", "gemma-4-drafter")
ASSISTANT_SUFFIX = "-assistant"


@cache
def gemma4_assistant() -> ModelSpec:
    """The assumed Gemma 4 assistant drafter (see module docstring)."""
    return ModelSpec.from_config(dict(GEMMA4_ASSISTANT_CONFIG), name="gemma-4-assistant", source="assumption")


def is_drafter_name(name: str) -> bool:
    """A built-in drafter: the Gemma 4 assistant, or `<catalog model>-assistant`."""
    return name.lower() in DRAFTER_NAMES or name.lower().endswith(ASSISTANT_SUFFIX)


@cache
def assistant_for(target: str) -> ModelSpec:
    """The drafter of `target`: Gemma 4's assistant, or for another model the same assumed 4-layer
    shape over the target's vocabulary (an EAGLE-style head published for none of them here)."""
    from lpxsim.catalog import get_model

    name = target.lower()
    if name in DRAFTER_NAMES or name.startswith("gemma-4"):
        return gemma4_assistant()
    base = get_model(name.removesuffix(ASSISTANT_SUFFIX))
    cfg = {**GEMMA4_ASSISTANT_CONFIG, "vocab_size": base.vocab_size, "hidden_act": "silu",
           "max_position_embeddings": base.max_context or 131072}
    return ModelSpec.from_config(cfg, name=f"{base.name}{ASSISTANT_SUFFIX}", source="assumption")
