"""The reference forward pass: a real Hugging Face model class, built offline with seeded random weights.

torch and transformers are a test extra: they are imported only inside these
functions, and a missing install is a UserError, not a traceback. The config is
a plain config.json dict; it is resolved through the HF config class so that
the HF model and lpxsim's ModelSpec read the same defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lpxsim.core.errors import UserError
from lpxsim.lpu.emulate.weights import graph_weights
from lpxsim.specs.model import ModelSpec

# Model types whose numerics the emulator's kernels follow (see kernels.py and docs/assumptions.md).
SUPPORTED_MODEL_TYPES = ("gemma4_text", "llama", "mistral", "mixtral", "qwen3")


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a config.json for the emulator; errors name the `config` field."""
    from lpxsim.core.structured import read_json

    p = Path(path)
    cfg = read_json(p, "config")  # missing, binary, huge, deeply nested or absurd-number files: one line
    if not isinstance(cfg, dict):
        raise UserError("config", f"{p.name} must hold a JSON object")
    return cfg


def _require_hf() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError:
        raise UserError(
            "reference", "the emulator compares against Hugging Face models: install the test extra "
            "(pip install 'lpxsim[test]', which brings torch==2.13.0 and transformers)"
        ) from None
    return torch, transformers


@dataclass
class Reference:
    """A built HF model, its resolved config, the ModelSpec of the same config, and graph-named weights."""

    config: dict[str, Any]
    spec: ModelSpec
    weights: dict[str, np.ndarray]
    model: Any = field(repr=False)


@dataclass
class GreedyRun:
    """Greedy decoding: `tokens[i]` was chosen from `logits[i]` (step 0 = the prefill's last position)."""

    tokens: list[int]
    logits: list[np.ndarray]


def _fill_random(model: Any, seed: int) -> None:
    """Overwrite every parameter with seeded values: matrices ~N(0, 1/last_dim), norm scales 1 + N(0, 0.1^2).

    HF's own init leaves norms at exactly 1 and biases at 0, which would hide a
    misplaced norm weight; these values do not.
    """
    import torch

    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = tuple(p.shape)
            if len(shape) == 1:
                base = 0.0 if name.endswith("bias") else 1.0
                vals = base + 0.5 * rng.standard_normal(shape)
            else:  # embeddings too: a tied head then gives O(1) logits, far from the soft-cap
                vals = rng.standard_normal(shape) / np.sqrt(shape[-1])
            p.copy_(torch.from_numpy(vals.astype(np.float32)))


def check_emulatable(cfg: dict[str, Any]) -> None:
    """UserError unless the config is of an architecture whose numerics the kernels follow."""
    model_type = str(cfg.get("model_type", ""))
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise UserError("config.model_type", f"{model_type!r} is not emulated; expected one of "
                        + ", ".join(SUPPORTED_MODEL_TYPES))
    if cfg.get("enable_moe_block"):
        raise UserError("config.enable_moe_block", "Gemma 4 MoE blocks are not emulated (use a Mixtral-style MoE)")
    if model_type == "gemma4_text" and cfg.get("hidden_size_per_layer_input"):
        raise UserError("config.hidden_size_per_layer_input", "per-layer embeddings are not emulated; set 0")
    for key in POSITIVE_FIELDS:  # transformers divides by them before any validator speaks
        v = cfg.get(key)
        if v is not None and not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            raise UserError(f"config.{key}", f"expected a whole number >= 1, got {v!r}")


# Fields a config states as counts or sizes, checked before transformers builds the model.
POSITIVE_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                   "num_key_value_heads", "head_dim", "vocab_size")


def _resolved_config(cfg: dict[str, Any], transformers: Any) -> Any:
    check_emulatable(cfg)
    model_type = str(cfg["model_type"])
    kwargs = {k: v for k, v in cfg.items() if k not in ("model_type", "architectures", "transformers_version")}
    if model_type == "gemma4_text":
        kwargs.setdefault("hidden_size_per_layer_input", 0)  # per-layer embeddings are not in the op graph
    try:
        return transformers.AutoConfig.for_model(model_type, **kwargs)
    except (*HF_CONFIG_ERRORS, *_config_validation_errors()) as e:
        raise _rejected(e) from None


# What transformers raises on a config it cannot build (a user's field, not a bug here): its validators' errors,
# and what a bad value trips on the way (`torch_dtype: float8`: AttributeError; `hidden_act: "8"`, a yarn RoPE
# without its factor: KeyError; `head_dim: 0`, `num_attention_heads: 0`: ZeroDivisionError).
HF_CONFIG_ERRORS = (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError, IndexError)


def _rejected(e: Exception) -> UserError:
    """One line naming the config and what transformers said of it."""
    reason = " ".join(str(e).split()) or type(e).__name__  # its validators' messages span lines: one line
    return UserError("config", f"transformers rejected the config ({type(e).__name__}): {reason}")


def _config_validation_errors() -> tuple[type[Exception], ...]:
    """The error huggingface_hub's strict config dataclasses raise on a failed validator (e.g. an odd rotary
    dimension); it is neither a TypeError nor a ValueError."""
    try:
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:
        return ()
    return (StrictDataclassError,)


def _check_rotary(spec: ModelSpec) -> None:
    """UserError unless every layer's rotary dimension is even: RoPE turns pairs of dimensions (HF's config
    validators miss an odd head_dim whose hidden_size / heads is even, and its forward pass then fails)."""
    for i, layer in enumerate(spec.layers):
        a = layer.attention
        dim = int(a.head_dim * a.partial_rotary_factor)
        if a.kind != "mla" and dim % 2:
            raise UserError("config.head_dim", f"layer {i} rotates {dim} dimensions (head_dim {a.head_dim} x "
                                               f"partial_rotary_factor {a.partial_rotary_factor:g}); RoPE needs "
                                               "an even number")


def build_reference(cfg: dict[str, Any], seed: int = 0) -> Reference:
    """Build the HF causal LM for `cfg` in float32 with seeded random weights, fully offline."""
    torch, transformers = _require_hf()
    hf_cfg = _resolved_config(cfg, transformers)
    # The ModelSpec sees HF's resolved defaults, overridden by what the user wrote (e.g. global_head_dim,
    # which Gemma4TextConfig consumes without keeping as an attribute).
    resolved = {**hf_cfg.to_dict(), **cfg}
    spec = ModelSpec.from_config(resolved, name=str(cfg.get("name", cfg.get("model_type", "model"))))
    _check_rotary(spec)
    torch.manual_seed(seed)
    # eager experts: HF's grouped-GEMM path needs 16-byte strides, which odd tiny hidden sizes do not have
    try:
        model = transformers.AutoModelForCausalLM.from_config(hf_cfg, attn_implementation="eager",
                                                             experts_implementation="eager", dtype=torch.float32)
    except (*HF_CONFIG_ERRORS, *_config_validation_errors()) as e:
        raise _rejected(e) from None
    model.eval()
    _fill_random(model, seed)
    state = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    if spec.tie_embeddings:
        state.pop("lm_head.weight", None)
    return Reference(config=resolved, spec=spec, weights=graph_weights(state), model=model)


def hf_greedy(ref: Reference, prompt: list[int], steps: int) -> GreedyRun:
    """Prefill `prompt` and decode `steps` tokens greedily with the HF model and its KV cache."""
    torch, transformers = _require_hf()
    tokens: list[int] = []
    logits: list[np.ndarray] = []
    with torch.no_grad():
        cache = transformers.DynamicCache(config=ref.model.config)
        ids = torch.tensor([prompt], dtype=torch.long)
        for _ in range(steps + 1):
            out = ref.model(input_ids=ids, cache=cache, use_cache=True)
            last = out.logits[0, -1].float().numpy().copy()
            tok = int(np.argmax(last))
            logits.append(last)
            tokens.append(tok)
            ids = torch.tensor([[tok]], dtype=torch.long)
    return GreedyRun(tokens=tokens, logits=logits)


def seeded_prompt(vocab_size: int, length: int, seed: int) -> list[int]:
    """A deterministic random prompt (token ids) for a seed."""
    rng = np.random.default_rng(seed + 1_000_003)
    return [int(t) for t in rng.integers(0, vocab_size, size=length)]
