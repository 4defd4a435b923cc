"""Parameter, weight-byte, KV-byte and FLOP arithmetic for a ModelSpec.

Counting rules follow shared reference models.md §9: per layer q/k/v/o (+biases,
qk-norms, sinks), the MLP or MoE (+router), norms; embedding and lm_head once
each (once in total when tied). "Active" parameters are those a decoded token
touches through a matmul: non-embedding active parameters plus the lm_head
(the input-embedding lookup is a gather, not a matmul).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lpxsim.specs.model import AttentionSpec, FfnSpec, LayerSpec, ModelSpec
from lpxsim.specs.precision import Precision, get_precision

KvLayout = Literal["separate", "k-once"]
KV_LAYOUTS: tuple[str, ...] = ("separate", "k-once")


@dataclass(frozen=True)
class LayerParams:
    """Parameter counts of one layer, split by where they live."""

    attention: int
    ffn_total: int  # all experts + router + dense MLP
    ffn_active: int  # what one token touches
    norms: int

    @property
    def total(self) -> int:
        return self.attention + self.ffn_total + self.norms

    @property
    def active(self) -> int:
        return self.attention + self.ffn_active + self.norms


def attention_params(a: AttentionSpec, hidden: int) -> int:
    """Parameters of one attention block (projections, biases, q/k norms, sinks)."""
    if a.kind == "mla":
        h, heads = hidden, a.num_heads
        q = (h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * heads * a.head_dim) if a.q_lora_rank else (
            h * heads * a.head_dim
        )
        kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
        kv += a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim)
        o = heads * a.v_head_dim * h
        return q + kv + o
    q = hidden * a.num_heads * a.head_dim
    k = hidden * a.num_kv_heads * a.head_dim
    v = 0 if a.k_eq_v else hidden * a.num_kv_heads * a.v_head_dim
    o = a.num_heads * a.v_head_dim * hidden
    n = q + k + v + o
    if a.qkv_bias:
        n += a.num_heads * a.head_dim + a.num_kv_heads * a.head_dim + (0 if a.k_eq_v else a.num_kv_heads * a.v_head_dim)
    if a.o_bias:
        n += hidden
    if a.qk_norm:
        n += 2 * a.head_dim
    if a.sinks:
        n += a.num_heads
    return n


def _mlp_params(hidden: int, inter: int, gated: bool, bias: bool = False) -> int:
    mats = 3 if gated else 2
    n = mats * hidden * inter
    if bias:
        n += (2 * inter if gated else inter) + hidden
    return n


def ffn_params(f: FfnSpec, hidden: int) -> tuple[int, int]:
    """(total, active-per-token) parameters of one FFN / MoE block."""
    if not f.is_moe:
        n = _mlp_params(hidden, f.intermediate, f.gated)
        return n, n
    expert = _mlp_params(hidden, f.expert_intermediate, f.gated, bias=f.expert_bias)
    router = f.num_experts * hidden + (f.num_experts if f.router_bias else 0)
    shared = f.num_shared_experts * _mlp_params(hidden, f.expert_intermediate, f.gated)
    dense = _mlp_params(hidden, f.intermediate, f.gated) if f.dense_beside_experts else 0
    total = f.num_experts * expert + router + shared + dense
    active = f.top_k * expert + router + shared + dense
    return total, active


def layer_params(layer: LayerSpec, hidden: int) -> LayerParams:
    ffn_total, ffn_active = ffn_params(layer.ffn, hidden)
    return LayerParams(
        attention=attention_params(layer.attention, hidden),
        ffn_total=ffn_total,
        ffn_active=ffn_active,
        norms=layer.num_norms * hidden,
    )


@dataclass(frozen=True)
class ParamCounts:
    """Whole-model parameter counts."""

    layers: tuple[LayerParams, ...]
    embedding: int
    lm_head: int  # 0 when tied
    final_norm: int

    @property
    def non_embedding(self) -> int:
        return sum(p.total for p in self.layers) + self.final_norm

    @property
    def total(self) -> int:
        return self.non_embedding + self.embedding + self.lm_head

    @property
    def active(self) -> int:
        """Parameters a decoded token touches through a matmul (includes the output projection)."""
        head = self.lm_head or self.embedding
        return sum(p.active for p in self.layers) + self.final_norm + head

    @property
    def active_incl_embedding(self) -> int:
        return self.active + (self.embedding if self.lm_head else 0)


def param_counts(m: ModelSpec) -> ParamCounts:
    h = m.hidden_size
    emb = m.vocab_size * h
    return ParamCounts(
        layers=tuple(layer_params(layer, h) for layer in m.layers),
        embedding=emb,
        lm_head=0 if m.tie_embeddings else emb,
        final_norm=h,
    )


def weight_bytes(m: ModelSpec, precision: str | Precision = "bf16") -> float:
    """Bytes of all weights at `precision` (norms and every matrix at that format, scales included)."""
    return param_counts(m).total * get_precision(precision, "weights").bytes_per_element


def layer_weight_bytes(m: ModelSpec, precision: str | Precision = "bf16") -> list[float]:
    b = get_precision(precision, "weights").bytes_per_element
    return [p.total * b for p in param_counts(m).layers]


# --- KV cache ------------------------------------------------------------------------


def kv_elements_per_token(a: AttentionSpec, layout: str = "separate") -> int:
    """KV elements one token stores in one layer.

    GQA stores K and V (2 x kv_heads x head_dim). On K=V layers, "separate" stores V
    anyway (as vLLM does; it reproduces vLLM's 27.04 GiB Gemma 4 check) and "k-once"
    stores the one tensor. MLA stores the latent plus the shared rope key.
    """
    if layout not in KV_LAYOUTS:
        from lpxsim.core.errors import UserError

        raise UserError("kv_layout", f"unknown KV layout {layout!r}; expected one of {', '.join(KV_LAYOUTS)}")
    if a.kind == "mla":
        return a.kv_lora_rank + a.qk_rope_head_dim
    per_tensor = a.num_kv_heads * a.head_dim
    if a.k_eq_v and layout == "k-once":
        return per_tensor
    return 2 * per_tensor


def kv_bytes_per_token_by_kind(
    m: ModelSpec, kv_precision: str | Precision = "bf16", layout: str = "separate"
) -> dict[str, float]:
    """Bytes per token of context summed over layers of each kind ("full", "sliding")."""
    b = get_precision(kv_precision, "kv").bytes_per_element
    out: dict[str, float] = {}
    for layer in m.layers:
        out[layer.kind] = out.get(layer.kind, 0.0) + kv_elements_per_token(layer.attention, layout) * b
    return out


def kv_bytes_per_sequence(
    m: ModelSpec,
    context: int,
    kv_precision: str | Precision = "bf16",
    layout: str = "separate",
    sliding_reserve_tokens: int = 0,
) -> float:
    """KV bytes held for one sequence of `context` tokens; sliding layers keep min(T, window [+ reserve])."""
    b = get_precision(kv_precision, "kv").bytes_per_element
    total = 0.0
    for layer in m.layers:
        a = layer.attention
        tokens = context if a.window is None else min(context, a.window + sliding_reserve_tokens)
        total += kv_elements_per_token(a, layout) * b * tokens
    return total


def kv_bytes_per_layer(
    m: ModelSpec, context: int, kv_precision: str | Precision = "bf16", layout: str = "separate"
) -> list[float]:
    """KV bytes of one sequence at `context`, per layer (window-capped)."""
    b = get_precision(kv_precision, "kv").bytes_per_element
    return [
        kv_elements_per_token(layer.attention, layout)
        * b
        * (context if layer.attention.window is None else min(context, layer.attention.window))
        for layer in m.layers
    ]


# --- FLOPs -----------------------------------------------------------------------------


def matmul_flops_per_token(m: ModelSpec) -> float:
    """2 x active matmul parameters (norm and bias parameters are not matmuls, negligible)."""
    return 2.0 * param_counts(m).active


def attention_flops_per_token(m: ModelSpec, context: int) -> float:
    """Score + value FLOPs of one decoded token at context T: sum over layers of 4 H d min(T, window).

    MLA in absorbed (latent) form attends over kv_lora + rope dims per head.
    """
    total = 0.0
    for layer in m.layers:
        a = layer.attention
        t = context if a.window is None else min(context, a.window)
        if a.kind == "mla":
            total += 2.0 * a.num_heads * t * ((a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank)
        else:
            total += 2.0 * a.num_heads * t * (a.head_dim + a.v_head_dim)
    return total


def decode_flops_per_token(m: ModelSpec, context: int) -> float:
    return matmul_flops_per_token(m) + attention_flops_per_token(m, context)
