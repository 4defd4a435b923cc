"""HBM budget of one GPU: weights, activations, runtime reserve, and what is left for KV.

KV bytes per GPU = (HBM - weights - activation workspace) x mem_fraction, the
TensorRT-LLM convention (`free_gpu_memory_fraction`, default 0.9): the rest of
the free memory is the runtime reserve (CUDA context, NCCL buffers, CUDA
graphs). The fraction-of-total convention (SGLang --mem-fraction-static) would
refuse DeepSeek-R1 fp8 on 4 B200s, which TensorRT-LLM serves in the
calibration data. The activation workspace is sized for the largest prefill
chunk. The replica's KV capacity in logical bytes (what
`kv_bytes(context)` counts) is the per-GPU space times its GPUs divided by how
often the KV is replicated (MLA under TP: on every GPU of a stage).
"""

from __future__ import annotations

from dataclasses import dataclass

from lpxsim.gpu.layout import Layout, kv_split
from lpxsim.specs.accounting import param_counts
from lpxsim.specs.model import ModelSpec
from lpxsim.specs.precision import get_precision

# Live activation tensors of one layer during a prefill chunk, in units of hidden-size rows
# (residual, norm output, q/k/v, attention output, MLP gate+up/intermediate): an assumption
# ("gpu-activation-workspace"), within the range the engines' profiling runs reserve.
ACT_ROWS_PER_TOKEN = 8.0


@dataclass(frozen=True)
class MemoryBudget:
    """Bytes on the busiest GPU of the replica."""

    hbm_bytes: float
    usable_bytes: float  # hbm - reserve
    weight_bytes: float
    activation_bytes: float
    kv_bytes: float  # left for KV on this GPU (may be negative: does not fit)
    kv_split: float  # ways a replica's KV is divided over the GPUs of a stage

    @property
    def fits(self) -> bool:
        return self.kv_bytes > 0


_COUNTS: dict[int, tuple[ModelSpec, object]] = {}


def _param_counts(model: ModelSpec):  # noqa: ANN202 - a specs.accounting ParamCounts
    """`param_counts` once per model object (a layout search sizes every candidate's weights)."""
    hit = _COUNTS.get(id(model))
    if hit is None or hit[0] is not model:  # the model itself: an id is reused only after it dies
        if len(_COUNTS) >= 64:
            _COUNTS.pop(next(iter(_COUNTS)))
        hit = _COUNTS[id(model)] = (model, param_counts(model))
    return hit[1]


def attention_params_per_gpu(layer, layer_params, layout: Layout, hidden_size: int) -> float:
    """One layer's attention parameters on one GPU: whole under DP attention, split by heads under TP
    (MLA's q_a / kv_a down-projections are replicated, the rest split)."""
    a = layer.attention
    if layout.dp_attention:
        return float(layer_params.attention)
    if a.kind == "mla":
        down = hidden_size * (a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim)
        return down + (layer_params.attention - down) / layout.tp
    return layer_params.attention / layout.tp


def _o_proj_params_per_gpu(layer, layout: Layout, hidden_size: int) -> float:  # noqa: ANN001 - a LayerSpec
    a = layer.attention
    return a.num_heads * a.v_head_dim * hidden_size / (1 if layout.dp_attention else layout.tp)


def attention_weight_bytes_per_gpu(model: ModelSpec, layout: Layout, weights: str,
                                   dense_weights: str | None = None, native: frozenset[str] = frozenset()) -> float:
    """Weights on the busiest GPU of an AFD attention replica: each layer's attention projections and norms,
    plus embedding and LM head; no FFN or expert weights (they live on the FFN side). `native`: as
    `weight_bytes_per_gpu`."""
    eb = get_precision(weights, "weights").bytes_per_element
    wb = get_precision(dense_weights or weights, "weights").bytes_per_element
    counts = _param_counts(model)
    per_stage = -(-model.num_layers // layout.pp)
    h = model.hidden_size
    layer_bytes = []
    for layer, lp in zip(model.layers, counts.layers, strict=True):
        o = _o_proj_params_per_gpu(layer, layout, h) if "o_proj" in native else 0.0
        layer_bytes.append((attention_params_per_gpu(layer, lp, layout, h) - o + lp.norms) * wb + o * eb)
    layer_bytes.sort(reverse=True)
    return sum(layer_bytes[:per_stage]) + (counts.embedding + counts.lm_head) / layout.tp * wb


def weight_bytes_per_gpu(model: ModelSpec, layout: Layout, weights: str, dense_weights: str | None = None,
                         native: frozenset[str] = frozenset()) -> float:
    """Weights on the busiest GPU: layers of one pipeline stage, split per the layout, plus embeddings.

    Routed experts are stored in `weights`; everything else in `dense_weights` (default: the same), except
    the matmuls named in `native` (gpu/checkpoint.py: "o_proj", the FFN half's "gate_up" / "shared_gate_up"),
    which are in `weights` too.
    """
    eb = get_precision(weights, "weights").bytes_per_element
    wb = get_precision(dense_weights or weights, "weights").bytes_per_element
    ffn_b = eb if native & {"gate_up", "shared_gate_up"} else wb
    counts = _param_counts(model)
    tp, h = layout.tp, model.hidden_size
    per_stage = -(-model.num_layers // layout.pp)
    layer_bytes = []
    for layer, lp in zip(model.layers, counts.layers, strict=True):
        attn = attention_params_per_gpu(layer, lp, layout, h)
        o = _o_proj_params_per_gpu(layer, layout, h) if "o_proj" in native else 0.0
        f = layer.ffn
        experts = f.num_experts * (3 if f.gated else 2) * h * f.expert_intermediate if f.is_moe else 0
        layer_bytes.append((attn - o + lp.norms) * wb + o * eb + (lp.ffn_total - experts) / tp * ffn_b
                           + experts / tp * eb)
    layer_bytes.sort(reverse=True)
    emb = (counts.embedding + counts.lm_head) / tp * wb
    return sum(layer_bytes[:per_stage]) + emb


def activation_bytes_per_gpu(model: ModelSpec, chunk_tokens: int, max_batch: int, act: str = "bf16") -> float:
    """Activation workspace for one prefill chunk, plus fp32 logits for the largest decode batch."""
    ab = get_precision(act, "activations").bytes_per_element
    return chunk_tokens * model.hidden_size * ab * ACT_ROWS_PER_TOKEN + model.vocab_size * 4.0 * max_batch


def budget(
    model: ModelSpec,
    layout: Layout,
    hbm_bytes: float,
    weights: str,
    mem_fraction: float,
    chunk_tokens: int,
    max_batch: int,
    dense_weights: str | None = None,
    native: frozenset[str] = frozenset(),
) -> MemoryBudget:
    """The HBM budget of the busiest GPU of one replica (`native`: as `weight_bytes_per_gpu`)."""
    w = weight_bytes_per_gpu(model, layout, weights, dense_weights, native)
    a = activation_bytes_per_gpu(model, chunk_tokens, max_batch)
    free = hbm_bytes - w - a
    kv = free * mem_fraction if free > 0 else free
    return MemoryBudget(hbm_bytes, hbm_bytes - max(free, 0.0) * (1.0 - mem_fraction), w, a, kv,
                        kv_split(model, layout))


def replica_kv_capacity_bytes(b: MemoryBudget, layout: Layout) -> float:
    """Logical KV bytes one replica holds: per-GPU space x GPUs / replication."""
    if b.kv_bytes <= 0:
        return 0.0
    # a stage of tp GPUs stores (kv_split / tp) of each sequence's layers per GPU; pp stages hold
    # disjoint layers, so the replica's capacity scales with pp at equal per-GPU space.
    return b.kv_bytes * b.kv_split * layout.pp
