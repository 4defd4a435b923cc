"""ModelSpec: a transformer's architecture read from a Hugging Face config.json.

Handles `text_config` nesting (Gemma 4), per-layer `layer_types` (sliding/full),
Gemma 4's `global_head_dim`, `num_global_key_value_heads` and `attention_k_eq_v`,
MoE under its several field names (routed/shared experts, top-k, first dense
layers, a dense FFN alongside the experts), MLA (DeepSeek/Kimi) and tied
embeddings. Parameter, byte, KV and FLOP arithmetic lives in `accounting.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lpxsim.core.errors import UserError

LayerKind = Literal["full", "sliding"]


@dataclass(frozen=True)
class AttentionSpec:
    """One layer's attention. `kind` is "gqa" (MHA/GQA/MQA) or "mla" (latent KV)."""

    kind: Literal["gqa", "mla"]
    num_heads: int
    num_kv_heads: int
    head_dim: int  # query/key head dim (MLA: nope + rope)
    v_head_dim: int
    window: int | None = None  # sliding window in tokens; None = full attention
    k_eq_v: bool = False  # V is derived from the K projection (Gemma 4 global layers)
    qkv_bias: bool = False
    o_bias: bool = False
    sinks: bool = False  # learned per-head attention sink logits (gpt-oss)
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3, Gemma)
    v_norm: bool = False  # scale-free norm on v (Gemma 4), no parameters
    # MLA only
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    rope_theta: float = 10_000.0
    partial_rotary_factor: float = 1.0

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim


@dataclass(frozen=True)
class FfnSpec:
    """One layer's feed-forward block: a dense gated MLP, or MoE (optionally with a dense MLP beside it)."""

    kind: Literal["dense", "moe"]
    intermediate: int = 0  # dense MLP width (or the dense FFN beside the experts)
    gated: bool = True  # gate+up+down (3 matrices) vs up+down (2)
    activation: str = "silu"
    num_experts: int = 0
    top_k: int = 0
    expert_intermediate: int = 0
    num_shared_experts: int = 0  # shared experts of width expert_intermediate
    dense_beside_experts: bool = False  # Gemma 4 MoE: a dense MLP of width `intermediate` runs too
    expert_bias: bool = False  # gpt-oss expert biases
    router_bias: bool = False
    swiglu_limit: float | None = None

    @property
    def is_moe(self) -> bool:
        return self.kind == "moe"


@dataclass(frozen=True)
class LayerSpec:
    index: int
    kind: LayerKind
    attention: AttentionSpec
    ffn: FfnSpec
    num_norms: int = 2  # hidden-size RMSNorms in the block (2 for Llama, 4 for Gemma)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only LLM as lpxsim sees it. Build with `ModelSpec.from_config`."""

    name: str
    model_type: str
    hidden_size: int
    vocab_size: int
    layers: tuple[LayerSpec, ...]
    tie_embeddings: bool
    max_context: int
    activation: str = "silu"
    rms_norm_eps: float = 1e-6
    final_logit_softcap: float | None = None
    mtp_layers: int = 0  # DeepSeek next-token-prediction modules (not counted in params)
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, hash=False)

    # --- construction -----------------------------------------------------------------
    @classmethod
    def from_path(cls, path: str | Path, name: str | None = None) -> ModelSpec:
        """Load a Hugging Face config.json from disk (named by `model_name` unless `name` is given)."""
        from lpxsim.core.inputs import check_path, is_file
        from lpxsim.core.structured import read_json

        p = check_path(path, "model")
        if p.is_dir() and is_file(p / "config.json"):  # a Hugging Face snapshot folder: its config.json
            p = p / "config.json"
        if not is_file(p):
            raise UserError("model", f"no such config file {str(p)!r}"
                                     + (" (a folder without a config.json)" if p.is_dir() else ""))
        cfg = read_json(p, "model")  # binary, huge, deeply nested or absurd-number files: one line
        if not isinstance(cfg, dict):
            raise UserError("model", f"{p.name} must hold a JSON object")
        return cls.from_config(cfg, name=name or model_name(cfg, p), source=str(p))

    @classmethod
    def from_config(cls, cfg: dict[str, Any], name: str = "model", source: str = "") -> ModelSpec:
        """Build from a parsed config.json dict (top level or with a `text_config`)."""
        from lpxsim.specs.config_parse import parse_config

        return parse_config(cls, cfg, name=name, source=source)

    # --- convenience views ------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def is_moe(self) -> bool:
        return any(layer.ffn.is_moe for layer in self.layers)

    @property
    def experts_per_token(self) -> int:
        """The most routed experts a token picks in any MoE layer (1 for a dense model)."""
        return max((layer.ffn.top_k for layer in self.layers if layer.ffn.is_moe), default=1)

    @property
    def is_mla(self) -> bool:
        return any(layer.attention.kind == "mla" for layer in self.layers)

    @property
    def layer_kinds(self) -> dict[LayerKind, int]:
        counts: dict[LayerKind, int] = {}
        for layer in self.layers:
            counts[layer.kind] = counts.get(layer.kind, 0) + 1
        return counts

    def window_note(self, context: int) -> str | None:
        """The note every answer at `context` tokens carries when the model's position embeddings do not reach
        that far (the hardware's figures stand; no request that long is served); None within its window."""
        if context <= self.max_context:
            return None
        return f"context {context:,} exceeds {self.name}'s max_position_embeddings {self.max_context:,}"

    def describe(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in self.layer_kinds.items())
        extra = []
        if self.is_moe:
            f = next(layer.ffn for layer in self.layers if layer.ffn.is_moe)
            extra.append(f"MoE {f.num_experts}x top-{f.top_k}")
        if self.is_mla:
            extra.append("MLA")
        return f"{self.name}: {self.num_layers} layers ({kinds}), hidden {self.hidden_size}" + (
            "; " + ", ".join(extra) if extra else ""
        )


_GENERIC_STEMS = ("config", "model", "params", "text_config")
NAME_MAX_CHARS = 120


def model_name(cfg: dict[str, Any], path: Path) -> str:
    """The name of a model given as a config.json path: the last part of its `_name_or_path` (a Hugging
    Face repo id or the folder it was saved from), else the file's stem, unless the stem is generic
    ("config"), then the folder's name."""
    given = cfg.get("_name_or_path")
    if isinstance(given, str):
        last = given.strip().replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        clean = "".join(ch for ch in last if ch.isprintable()).strip()
        if clean and clean not in (".", ".."):
            return clean[:NAME_MAX_CHARS]
    stem = path.stem
    if stem.lower() in _GENERIC_STEMS:
        folder = path.resolve().parent.name
        if folder:
            return folder[:NAME_MAX_CHARS]
    return stem[:NAME_MAX_CHARS]
