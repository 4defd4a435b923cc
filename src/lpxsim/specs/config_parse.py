"""Parse a Hugging Face config.json dict into a ModelSpec.

One function per concern: which dict holds the text model, which layers are
sliding, what each layer's attention and FFN look like. Field names follow the
publishers' configs as they are (see catalog/models/).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from lpxsim.core.errors import UserError

if TYPE_CHECKING:
    from lpxsim.specs.model import AttentionSpec, FfnSpec, ModelSpec

_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")

# Allowed range of every integer field read here: far above any published model, low enough that the
# arithmetic and the compiler stay fast (a huge num_hidden_layers used to raise MemoryError).
_BIG = 2**31 - 1
BOUNDS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, 1_000),
    "hidden_size": (1, 262_144),
    "num_attention_heads": (1, 16_384),
    "num_key_value_heads": (1, 16_384),
    "num_global_key_value_heads": (1, 16_384),
    "head_dim": (1, 16_384),
    "global_head_dim": (1, 16_384),
    "vocab_size": (1, 10_000_000),
    "intermediate_size": (0, 4_194_304),
    "moe_intermediate_size": (0, 4_194_304),
    "expert_intermediate_size": (0, 4_194_304),
    "num_experts": (0, 4_096),
    "n_routed_experts": (0, 4_096),
    "num_local_experts": (0, 4_096),
    "num_experts_per_tok": (0, 4_096),
    "top_k_experts": (0, 4_096),
    "experts_per_token": (0, 4_096),
    "n_shared_experts": (0, 64),
    "sliding_window": (1, _BIG),
    "sliding_window_pattern": (1, 1_000),
    "max_window_layers": (0, 1_000),
    "first_k_dense_replace": (0, 1_000),
    "moe_layer_freq": (0, 1_000),
    "decoder_sparse_step": (0, 1_000),
    "max_position_embeddings": (1, _BIG),
    "max_sequence_length": (1, _BIG),
    "q_lora_rank": (0, 262_144),
    "kv_lora_rank": (0, 262_144),
    "qk_nope_head_dim": (0, 16_384),
    "qk_rope_head_dim": (0, 16_384),
    "v_head_dim": (1, 16_384),
    "num_kv_shared_layers": (0, 1_000),
    "num_nextn_predict_layers": (0, 100),
}


def _text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    text = cfg.get("text_config")
    if isinstance(text, dict):
        merged = dict(text)
        # Tie flag sometimes only at the top level of multimodal wrappers.
        merged.setdefault("tie_word_embeddings", cfg.get("tie_word_embeddings"))
        return merged
    return cfg


def _int(t: dict[str, Any], key: str, default: int | None = None) -> int:
    """An integer field inside its BOUNDS range (`default` when absent or null)."""
    v = t.get(key)
    if v is None:
        v = default
    lo, hi = BOUNDS.get(key, (0, _BIG))
    if v is None:
        raise UserError(f"config.{key}", f"missing; expected an integer in {lo:,}..{hi:,}")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or int(v) != v:
        raise UserError(f"config.{key}", f"expected an integer in {lo:,}..{hi:,}, got {v!r}")
    if not lo <= v <= hi:
        raise UserError(f"config.{key}", f"expected an integer in {lo:,}..{hi:,}, got {int(v):,}")
    return int(v)


def _opt_int(t: dict[str, Any], key: str, default: int = 0) -> int:
    """An optional integer field: absent, null, 0 or false read as `default`."""
    v = t.get(key)
    return default if v is None or v is False or v == 0 else _int(t, key)


def _float(t: dict[str, Any], key: str, default: float | None, lo: float, hi: float) -> float | None:
    """A finite number in [lo, hi] (`default` when absent or null)."""
    v = t.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
        raise UserError(f"config.{key}", f"expected a finite number in {lo:g}..{hi:g}, got {v!r}")
    return float(v)


def _bool(t: dict[str, Any], key: str, default: bool = False) -> bool:
    """A true/false field (`default` when absent or null); "yes", 1 or a list is refused, not guessed."""
    v = t.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise UserError(f"config.{key}", f"expected true or false, got {v!r}")
    return v


def _str(t: dict[str, Any], key: str, default: str = "") -> str:
    """A text field such as `model_type` (`default` when absent or null)."""
    v = t.get(key)
    if v is None:
        return default
    if not isinstance(v, str):
        raise UserError(f"config.{key}", f"expected a string, got {v!r}")
    return v


# true/false and text fields read here: a wrong type is refused by name before any is used
BOOL_FIELDS = ("tie_word_embeddings", "attention_bias", "use_sliding_window", "attention_k_eq_v", "enable_moe_block")
STR_FIELDS = ("model_type", "hidden_act", "hidden_activation", "topk_method")


def _check_types(t: dict[str, Any]) -> None:
    for key in BOOL_FIELDS:
        _bool(t, key)
    for key in STR_FIELDS:
        _str(t, key)
    only = t.get("mlp_only_layers")
    if only is not None and (not isinstance(only, list)
                             or not all(isinstance(i, int) and not isinstance(i, bool) for i in only)):
        raise UserError("config.mlp_only_layers", f"expected a list of layer indices, got {only!r}")


def _first(t: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if t.get(k) is not None:
            return t[k]
    return default


def _layer_kinds(t: dict[str, Any], n_layers: int) -> list[str]:
    """'full' or 'sliding' per layer, from `layer_types` or the older sliding-window fields."""
    types = t.get("layer_types")
    window = t.get("sliding_window")
    if types is not None:
        if not isinstance(types, list) or len(types) != n_layers:
            raise UserError("config.layer_types", f"expected a list of {n_layers} layer types")
        kinds = []
        for i, lt in enumerate(types):
            if not isinstance(lt, str):
                raise UserError(f"config.layer_types[{i}]", f"expected a layer type name, got {lt!r}")
            if lt in ("sliding_attention", "sliding", "local"):
                kinds.append("sliding")
            elif lt in ("full_attention", "full", "global", "attention"):
                kinds.append("full")
            else:
                raise UserError(f"config.layer_types[{i}]", f"unknown layer type {lt!r}")
        if "sliding" in kinds and not window:
            raise UserError("config.sliding_window", "layer_types has sliding layers but no sliding_window")
        return kinds
    pattern = _opt_int(t, "sliding_window_pattern")
    window = _opt_int(t, "sliding_window")
    if window and pattern:  # Gemma 3: layer i global iff (i+1) % pattern == 0
        return ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(n_layers)]
    if window and t.get("use_sliding_window"):  # Qwen2-style: sliding below max_window_layers
        max_window_layers = _int(t, "max_window_layers", n_layers)
        return ["sliding" if i < max_window_layers else "full" for i in range(n_layers)]
    return ["full"] * n_layers


_THETA = (1e-3, 1e15)


def _rope(t: dict[str, Any], kind: str) -> tuple[float, float]:
    theta = _float(t, "rope_theta", 10_000.0, *_THETA) or 10_000.0
    partial = _float(t, "partial_rotary_factor", 1.0, 0.0, 1.0)
    params = t.get("rope_parameters")
    if isinstance(params, dict):
        key = "sliding_attention" if kind == "sliding" else "full_attention"
        p = params.get(key, params)
        if isinstance(p, dict):
            theta = _float({"rope_theta": p.get("rope_theta", theta)}, "rope_theta", theta, *_THETA)
            partial = _float({"partial_rotary_factor": p.get("partial_rotary_factor", partial)},
                             "partial_rotary_factor", partial, 0.0, 1.0)
    return float(theta), float(partial)


def _attention(t: dict[str, Any], kind: str) -> AttentionSpec:
    from lpxsim.specs.model import AttentionSpec

    heads = _int(t, "num_attention_heads")
    theta, partial = _rope(t, kind)
    window = _int(t, "sliding_window") if kind == "sliding" else None
    is_gemma = str(t.get("model_type", "")).startswith("gemma")
    if t.get("kv_lora_rank"):
        nope, rope = _int(t, "qk_nope_head_dim"), _int(t, "qk_rope_head_dim")
        return AttentionSpec(
            kind="mla",
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=nope + rope,
            v_head_dim=_int(t, "v_head_dim"),
            window=window,
            q_lora_rank=_int(t, "q_lora_rank", 0),
            kv_lora_rank=_int(t, "kv_lora_rank"),
            qk_nope_head_dim=nope,
            qk_rope_head_dim=rope,
            qkv_bias=bool(t.get("attention_bias", False)),
            rope_theta=theta,
        )
    kv_heads = _int(t, "num_key_value_heads", heads)
    head_dim = _opt_int(t, "head_dim")
    if not head_dim:  # the heads split the hidden size: a remainder is a config no model was built from
        hidden = _int(t, "hidden_size")
        if hidden % heads:
            raise UserError("config.hidden_size", f"{hidden} is not a multiple of num_attention_heads {heads}, "
                                                  "and no head_dim is given")
        head_dim = max(1, hidden // heads)
    k_eq_v = False
    if kind == "full" and t.get("global_head_dim"):
        head_dim = _int(t, "global_head_dim")
        kv_heads = _int(t, "num_global_key_value_heads", kv_heads)
        k_eq_v = bool(t.get("attention_k_eq_v", False))
    if heads % max(kv_heads, 1):
        raise UserError("config.num_key_value_heads", f"{kv_heads} does not divide num_attention_heads {heads}")
    model_type = str(t.get("model_type", ""))
    bias = bool(t.get("attention_bias", False))
    return AttentionSpec(
        kind="gqa",
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=head_dim,
        window=window,
        k_eq_v=k_eq_v,
        qkv_bias=bias,
        o_bias=bias,
        sinks=model_type.startswith("gpt_oss"),
        qk_norm=is_gemma or model_type.startswith("qwen3"),
        v_norm=model_type.startswith("gemma4"),
        rope_theta=theta,
        partial_rotary_factor=partial,
    )


def _moe_fields(t: dict[str, Any]) -> tuple[int, int]:
    def first(*keys: str) -> int:
        for k in keys:
            if t.get(k) is not None:
                return _int(t, k)
        return 0

    return (first("num_experts", "n_routed_experts", "num_local_experts"),
            first("num_experts_per_tok", "top_k_experts", "experts_per_token"))


def _is_moe_layer(t: dict[str, Any], i: int, n_experts: int) -> bool:
    if n_experts <= 0:
        return False
    if "enable_moe_block" in t and not t.get("enable_moe_block"):
        return False
    if i < _opt_int(t, "first_k_dense_replace"):
        return False
    only = t.get("mlp_only_layers") or []
    if not isinstance(only, list):
        raise UserError("config.mlp_only_layers", f"expected a list of layer indices, got {only!r}")
    if i in only:
        return False
    step = _opt_int(t, "moe_layer_freq") or _opt_int(t, "decoder_sparse_step") or 1
    return (i + 1) % step == 0 if "decoder_sparse_step" in t else i % step == 0


def _ffn(t: dict[str, Any], i: int) -> FfnSpec:
    from lpxsim.specs.model import FfnSpec

    act = str(_first(t, "hidden_activation", "hidden_act", default="silu"))
    experts, top_k = _moe_fields(t)
    inter = _opt_int(t, "intermediate_size")
    model_type = str(t.get("model_type", ""))
    if not _is_moe_layer(t, i, experts):
        if inter <= 0:
            raise UserError("config.intermediate_size", "expected a positive integer for a dense FFN")
        return FfnSpec(kind="dense", intermediate=inter, activation=act)
    if top_k <= 0 or top_k > experts:
        raise UserError("config.num_experts_per_tok", f"expected 1..{experts}, got {top_k}")
    expert_inter = _opt_int(t, "moe_intermediate_size") or _opt_int(t, "expert_intermediate_size") or inter
    if expert_inter <= 0:
        raise UserError("config.moe_intermediate_size", "expected a positive integer for the experts' FFN")
    gemma_moe = model_type.startswith("gemma4")
    gpt_oss = model_type.startswith("gpt_oss")
    return FfnSpec(
        kind="moe",
        intermediate=inter if gemma_moe else 0,
        activation=act,
        num_experts=experts,
        top_k=top_k,
        expert_intermediate=expert_inter,
        num_shared_experts=_opt_int(t, "n_shared_experts"),
        dense_beside_experts=gemma_moe,
        expert_bias=gpt_oss,
        router_bias=gpt_oss or bool(t.get("topk_method") == "noaux_tc"),
        swiglu_limit=_float(t, "swiglu_limit", None, 0.0, 1e6),
    )


# Hugging Face model types of encoder-only transformers: their config.json has every field a decoder's has
ENCODER_ONLY = frozenset({"albert", "bert", "camembert", "deberta", "deberta-v2", "distilbert", "electra", "ernie",
                          "modernbert", "mpnet", "roberta", "xlm-roberta"})


def _max_context(t: dict[str, Any]) -> int:
    return _opt_int(t, "max_position_embeddings") or _opt_int(t, "max_sequence_length") or 4096


def parse_config(cls: type[ModelSpec], cfg: dict[str, Any], name: str, source: str) -> ModelSpec:
    """Parse `cfg` (a config.json dict) into `cls` (ModelSpec)."""
    from lpxsim.specs.model import LayerSpec

    t = _text_config(cfg)
    _check_types(t)
    if t is not cfg:  # a multimodal wrapper's own fields too (its tie flag may be the one in force)
        _check_types(cfg)
    for key in _REQUIRED:
        if key not in t:
            raise UserError(f"config.{key}", "missing; this does not look like a decoder LLM config.json")
        _int(t, key)
    n_layers = _int(t, "num_hidden_layers")
    if n_layers == 0:
        raise UserError("config.num_hidden_layers", "expected at least one layer")
    if _opt_int(t, "num_kv_shared_layers"):
        raise UserError("config.num_kv_shared_layers", "KV-shared layers (Gemma 4 E2B/E4B) are not supported")
    model_type = str(t.get("model_type") or cfg.get("model_type") or "unknown")
    if model_type.lower() in ENCODER_ONLY:  # the same fields, but no decode step to serve
        raise UserError("config.model_type", f"{model_type!r} is an encoder-only model; lpxsim serves decoder LLMs")
    norms = 4 if model_type.startswith("gemma") else 2
    layers = tuple(
        LayerSpec(index=i, kind=kind, attention=_attention(t, kind), ffn=_ffn(t, i), num_norms=norms)  # type: ignore[arg-type]
        for i, kind in enumerate(_layer_kinds(t, n_layers))
    )
    return cls(
        name=name,
        model_type=model_type,
        hidden_size=_int(t, "hidden_size"),
        vocab_size=_int(t, "vocab_size"),
        layers=layers,
        tie_embeddings=_bool(t, "tie_word_embeddings"),
        max_context=_max_context(t),
        activation=str(_first(t, "hidden_activation", "hidden_act", default="silu")),
        rms_norm_eps=_float(t, "rms_norm_eps", 1e-6, 0.0, 1.0) or 1e-6,
        final_logit_softcap=_float(t, "final_logit_softcapping", None, 0.0, 1e6) or None,
        mtp_layers=_opt_int(t, "num_nextn_predict_layers"),
        source=source,
        raw=cfg,
    )
