"""Parse a Hugging Face config.json dict into a ModelSpec.

One function per concern: which dict holds the text model, which layers are
sliding, what each layer's attention and FFN look like. Field names follow the
publishers' configs as they are (see catalog/models/).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lpxsim.errors import UserError

if TYPE_CHECKING:
    from lpxsim.specs.model import AttentionSpec, FfnSpec, ModelSpec

_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def _text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    text = cfg.get("text_config")
    if isinstance(text, dict):
        merged = dict(text)
        # Tie flag sometimes only at the top level of multimodal wrappers.
        merged.setdefault("tie_word_embeddings", cfg.get("tie_word_embeddings"))
        return merged
    return cfg


def _int(t: dict[str, Any], key: str, default: int | None = None) -> int:
    v = t.get(key, default)
    if v is None:
        raise UserError(f"config.{key}", "missing; expected a positive integer")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v or v < 0:
        raise UserError(f"config.{key}", f"expected a non-negative integer, got {v!r}")
    return int(v)


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
            if lt in ("sliding_attention", "sliding", "local"):
                kinds.append("sliding")
            elif lt in ("full_attention", "full", "global", "attention"):
                kinds.append("full")
            else:
                raise UserError(f"config.layer_types[{i}]", f"unknown layer type {lt!r}")
        if "sliding" in kinds and not window:
            raise UserError("config.sliding_window", "layer_types has sliding layers but no sliding_window")
        return kinds
    pattern = t.get("sliding_window_pattern")
    if window and pattern:  # Gemma 3: layer i global iff (i+1) % pattern == 0
        return ["full" if (i + 1) % int(pattern) == 0 else "sliding" for i in range(n_layers)]
    if window and t.get("use_sliding_window"):  # Qwen2-style: sliding below max_window_layers
        max_window_layers = int(t.get("max_window_layers", n_layers))
        return ["sliding" if i < max_window_layers else "full" for i in range(n_layers)]
    return ["full"] * n_layers


def _rope(t: dict[str, Any], kind: str) -> tuple[float, float]:
    params = t.get("rope_parameters")
    if isinstance(params, dict):
        key = "sliding_attention" if kind == "sliding" else "full_attention"
        p = params.get(key, params)
        if isinstance(p, dict):
            return float(p.get("rope_theta", t.get("rope_theta", 10_000.0))), float(
                p.get("partial_rotary_factor", 1.0)
            )
    return float(t.get("rope_theta", 10_000.0) or 10_000.0), float(t.get("partial_rotary_factor", 1.0))


def _attention(t: dict[str, Any], kind: str) -> AttentionSpec:
    from lpxsim.specs.model import AttentionSpec

    heads = _int(t, "num_attention_heads")
    theta, partial = _rope(t, kind)
    window = int(t["sliding_window"]) if kind == "sliding" else None
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
    head_dim = int(t.get("head_dim") or _int(t, "hidden_size") // heads)
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
    experts = _first(t, "num_experts", "n_routed_experts", "num_local_experts", default=0) or 0
    top_k = _first(t, "num_experts_per_tok", "top_k_experts", "experts_per_token", default=0) or 0
    return int(experts), int(top_k)


def _is_moe_layer(t: dict[str, Any], i: int, n_experts: int) -> bool:
    if n_experts <= 0:
        return False
    if "enable_moe_block" in t and not t.get("enable_moe_block"):
        return False
    if i < int(t.get("first_k_dense_replace", 0) or 0):
        return False
    if i in (t.get("mlp_only_layers") or []):
        return False
    step = int(t.get("moe_layer_freq", 0) or t.get("decoder_sparse_step", 0) or 1)
    return (i + 1) % step == 0 if "decoder_sparse_step" in t else i % step == 0


def _ffn(t: dict[str, Any], i: int) -> FfnSpec:
    from lpxsim.specs.model import FfnSpec

    act = str(_first(t, "hidden_activation", "hidden_act", default="silu"))
    experts, top_k = _moe_fields(t)
    inter = int(t.get("intermediate_size") or 0)
    model_type = str(t.get("model_type", ""))
    if not _is_moe_layer(t, i, experts):
        if inter <= 0:
            raise UserError("config.intermediate_size", "expected a positive integer for a dense FFN")
        return FfnSpec(kind="dense", intermediate=inter, activation=act)
    if top_k <= 0 or top_k > experts:
        raise UserError("config.num_experts_per_tok", f"expected 1..{experts}, got {top_k}")
    expert_inter = int(_first(t, "moe_intermediate_size", "expert_intermediate_size", default=0) or inter)
    gemma_moe = model_type.startswith("gemma4")
    gpt_oss = model_type.startswith("gpt_oss")
    return FfnSpec(
        kind="moe",
        intermediate=inter if gemma_moe else 0,
        activation=act,
        num_experts=experts,
        top_k=top_k,
        expert_intermediate=expert_inter,
        num_shared_experts=int(t.get("n_shared_experts") or 0),
        dense_beside_experts=gemma_moe,
        expert_bias=gpt_oss,
        router_bias=gpt_oss or bool(t.get("topk_method") == "noaux_tc"),
        swiglu_limit=t.get("swiglu_limit"),
    )


def _max_context(t: dict[str, Any]) -> int:
    return int(t.get("max_position_embeddings") or t.get("max_sequence_length") or 4096)


def parse_config(cls: type[ModelSpec], cfg: dict[str, Any], name: str, source: str) -> ModelSpec:
    """Parse `cfg` (a config.json dict) into `cls` (ModelSpec)."""
    from lpxsim.specs.model import LayerSpec

    t = _text_config(cfg)
    for key in _REQUIRED:
        if key not in t:
            raise UserError(f"config.{key}", "missing; this does not look like a decoder LLM config.json")
        _int(t, key)
    n_layers = _int(t, "num_hidden_layers")
    if n_layers == 0:
        raise UserError("config.num_hidden_layers", "expected at least one layer")
    if int(t.get("num_kv_shared_layers") or 0):
        raise UserError("config.num_kv_shared_layers", "KV-shared layers (Gemma 4 E2B/E4B) are not supported")
    model_type = str(t.get("model_type") or cfg.get("model_type") or "unknown")
    norms = 4 if model_type.startswith("gemma") else 2
    layers = tuple(
        LayerSpec(index=i, kind=kind, attention=_attention(t, kind), ffn=_ffn(t, i), num_norms=norms)  # type: ignore[arg-type]
        for i, kind in enumerate(_layer_kinds(t, n_layers))
    )
    tie = t.get("tie_word_embeddings")
    return cls(
        name=name,
        model_type=model_type,
        hidden_size=_int(t, "hidden_size"),
        vocab_size=_int(t, "vocab_size"),
        layers=layers,
        tie_embeddings=bool(tie) if tie is not None else False,
        max_context=_max_context(t),
        activation=str(_first(t, "hidden_activation", "hidden_act", default="silu")),
        rms_norm_eps=float(t.get("rms_norm_eps") or 1e-6),
        final_logit_softcap=t.get("final_logit_softcapping"),
        mtp_layers=int(t.get("num_nextn_predict_layers") or 0),
        source=source,
        raw=cfg,
    )
