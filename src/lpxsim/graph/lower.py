"""Lower a ModelSpec and a Phase into an OpGraph.

Per layer: norms, Q/K/V projections (MLA: low-rank q and latent kv), q/k norms,
RoPE, KV write, attention over the cache (window-capped on sliding layers),
output projection, residual; then a dense gated MLP or a MoE block (router,
routed experts as one grouped op, shared experts / a dense MLP beside them);
final norm, logits, soft-capping and sampling. Bytes are totals for the step.
"""

from __future__ import annotations

from collections import Counter

from lpxsim.graph.ops import Op, OpGraph, Phase
from lpxsim.specs.accounting import kv_elements_per_token
from lpxsim.specs.model import FfnSpec, LayerSpec, ModelSpec
from lpxsim.specs.precision import get_precision


def expected_experts_touched(num_experts: int, top_k: int, tokens: int, skew: float = 0.0) -> float:
    """Expected distinct experts hit by `tokens` tokens, each choosing `top_k` of `num_experts`.

    Uniform routing gives E (1 - (1 - k/E)^B). `skew` in [0, 1) shrinks the effective
    expert pool to E (1 - skew), a simple stand-in for popular experts soaking up tokens.
    """
    if tokens <= 0:
        return 0.0
    pool = max(float(top_k), num_experts * (1.0 - skew))
    return pool * (1.0 - (1.0 - top_k / pool) ** tokens)


class _Builder:
    """Accumulates ops for one graph; knows the byte sizes of weights, KV and activations."""

    def __init__(self, model: ModelSpec, phase: Phase, weights: str, kv: str, kv_layout: str, act: str) -> None:
        self.m = model
        self.phase = phase
        self.wb = get_precision(weights, "weights").bytes_per_element
        self.kvb = get_precision(kv, "kv").bytes_per_element
        self.ab = get_precision(act, "activations").bytes_per_element
        self.kv_layout = kv_layout
        self.ops: list[Op] = []
        self.M = phase.tokens
        self._attention_reads: dict[int | None, tuple[float, int]] = {}

    def attention_reads(self, window: int | None) -> tuple[float, int]:
        """(keys attended summed over the step's new positions, KV tokens read) over every sequence, for a
        layer of this attention window: the same for every layer of that window, so summed once per graph
        (a batch of thousands of sequences over a hundred layers made this sum most of a lowering)."""
        hit = self._attention_reads.get(window)
        if hit is None:
            hit = attention_sums(self.phase.contexts, self.phase.new_tokens, window)
            self._attention_reads[window] = hit
        return hit

    def add(self, **kw: object) -> str:
        op = Op(**kw)  # type: ignore[arg-type]
        self.ops.append(op)
        return op.name

    def matmul(self, name: str, layer: int, src: str, k: int, n: int, weight: str, **attrs: object) -> str:
        M = self.M
        return self.add(
            name=name, kind="matmul", layer=layer, inputs=(src,), tokens=M, flops=2.0 * M * k * n,
            weight_bytes=k * n * self.wb, act_in_bytes=M * k * self.ab, act_out_bytes=M * n * self.ab,
            shape=(M, k, n), weight=weight, attrs=attrs,
        )

    def head_matmul(self, name: str, layer: int, src: str, heads: int, k: int, n: int, weight: str) -> str:
        """`heads` independent [M, k] x [k, n] products, one weight slice per head (MLA absorption)."""
        M = self.M
        return self.add(
            name=name, kind="matmul", layer=layer, inputs=(src,), tokens=M, flops=2.0 * M * heads * k * n,
            weight_bytes=heads * k * n * self.wb, act_in_bytes=M * heads * k * self.ab,
            act_out_bytes=M * heads * n * self.ab, shape=(M, k, n), weight=weight,
            attrs={"per_head": True, "heads": heads},
        )

    def norm(self, name: str, layer: int, src: str, width: int, weight: str, **attrs: object) -> str:
        M = self.M
        return self.add(
            name=name, kind="norm", layer=layer, inputs=(src,), tokens=M, flops=4.0 * M * width,
            weight_bytes=width * self.wb if weight else 0.0, act_in_bytes=M * width * self.ab,
            act_out_bytes=M * width * self.ab, shape=(M, width), weight=weight,
            attrs={"eps": self.m.rms_norm_eps, **attrs},
        )

    def pointwise(self, name: str, kind: str, layer: int, srcs: tuple[str, ...], width: int, **attrs: object) -> str:
        M = self.M
        return self.add(
            name=name, kind=kind, layer=layer, inputs=srcs, tokens=M, flops=float(M * width * max(1, len(srcs))),
            act_in_bytes=len(srcs) * M * width * self.ab, act_out_bytes=M * width * self.ab,
            shape=(M, width), attrs=attrs,
        )


def _rope_type(model: ModelSpec, kind: str) -> str:
    """RoPE variant of a layer kind from the config ("default", or e.g. Gemma 4's "proportional")."""
    raw = model.raw.get("text_config") if isinstance(model.raw.get("text_config"), dict) else model.raw
    params = raw.get("rope_parameters") or raw.get("rope_scaling")
    if isinstance(params, dict):
        p = params.get("sliding_attention" if kind == "sliding" else "full_attention", params)
        if isinstance(p, dict):
            return str(p.get("rope_type") or p.get("type") or "default")
    return "default"


def _router_renormalizes(model: ModelSpec) -> bool:
    """Whether the top-k router weights are renormalised to sum to 1 (Mixtral yes; Qwen MoE per config)."""
    raw = model.raw.get("text_config") if isinstance(model.raw.get("text_config"), dict) else model.raw
    return bool(raw.get("norm_topk_prob", True))


def _attended(context: int, new: int, window: int | None) -> float:
    """Sum over the `new` causal positions of the keys each attends to (window-capped)."""
    total = 0.0
    for i in range(1, new + 1) if new <= 64 else ():
        t = context + i
        total += t if window is None else min(t, window)
    if new > 64:  # closed form for long prefill chunks
        lo, hi = context + 1, context + new
        if window is None or hi <= window:
            total = (lo + hi) * new / 2.0
        elif lo >= window:
            total = float(window) * new
        else:
            below = window - lo + 1
            total = (lo + window) * below / 2.0 + float(window) * (new - below)
    return total


def _kv_read_tokens(context: int, new: int, window: int | None) -> int:
    t = context + new
    return t if window is None else min(t, window + new - 1 if new > 1 else window)


def attention_sums(contexts: tuple[int, ...], new: int, window: int | None) -> tuple[float, int]:
    """(keys attended, KV tokens read) summed over sequences at `contexts`, each adding `new` positions
    under `window`: once per distinct context (a batch's sequences often share one; the sums are of whole
    numbers, so the grouping leaves them exact)."""
    counts = Counter(contexts)
    return (sum(n * _attended(c, new, window) for c, n in counts.items()),
            sum(n * _kv_read_tokens(c, new, window) for c, n in counts.items()))


def _attention_block(b: _Builder, layer: LayerSpec, x: str) -> str:
    """Pre-norm attention with output projection and residual; returns the new residual stream."""
    a, L, h, ph = layer.attention, layer.index, b.m.hidden_size, b.phase
    pre = f"layers.{L}"
    n = b.norm(f"L{L}.attn_norm", L, x, h, f"{pre}.input_layernorm")
    if a.kind == "mla":
        return _mla_core(b, layer, n, x)
    q = b.matmul(f"L{L}.q_proj", L, n, h, a.num_heads * a.head_dim, f"{pre}.self_attn.q_proj",
                 heads=a.num_heads, head_dim=a.head_dim, bias=a.qkv_bias)
    k = b.matmul(f"L{L}.k_proj", L, n, h, a.num_kv_heads * a.head_dim, f"{pre}.self_attn.k_proj",
                 heads=a.num_kv_heads, head_dim=a.head_dim, bias=a.qkv_bias)
    v = k
    if not a.k_eq_v:
        v = b.matmul(f"L{L}.v_proj", L, n, h, a.num_kv_heads * a.v_head_dim, f"{pre}.self_attn.v_proj",
                     heads=a.num_kv_heads, head_dim=a.v_head_dim, bias=a.qkv_bias)
    if a.qk_norm:
        q = b.norm(f"L{L}.q_norm", L, q, a.num_heads * a.head_dim, f"{pre}.self_attn.q_norm", per_head=a.head_dim)
        k = b.norm(f"L{L}.k_norm", L, k, a.num_kv_heads * a.head_dim, f"{pre}.self_attn.k_norm",
                   per_head=a.head_dim)
    if a.v_norm:
        v = b.norm(f"L{L}.v_norm", L, v, a.num_kv_heads * a.v_head_dim, "", per_head=a.v_head_dim, scale=False)
    qk_width = (a.num_heads + a.num_kv_heads) * a.head_dim
    r = b.pointwise(f"L{L}.rope", "rope", L, (q, k), qk_width, theta=a.rope_theta,
                    partial=a.partial_rotary_factor, head_dim=a.head_dim,
                    rope_type=_rope_type(b.m, layer.kind), heads=a.num_heads, kv_heads=a.num_kv_heads)
    kv_elems = kv_elements_per_token(a, b.kv_layout)
    w = b.add(name=f"L{L}.kv_write", kind="kv_write", layer=L, inputs=(r, v), tokens=b.M, flops=0.0,
              kv_write_bytes=b.M * kv_elems * b.kvb, act_in_bytes=b.M * kv_elems * b.ab,
              shape=(b.M, kv_elems), attrs={"k_eq_v": a.k_eq_v, "layout": b.kv_layout, "window": a.window})
    attended, kv_tokens = b.attention_reads(a.window)
    att = b.add(
        name=f"L{L}.attention", kind="attention", layer=L, inputs=(r, w), tokens=b.M,
        flops=2.0 * a.num_heads * (a.head_dim + a.v_head_dim) * attended,
        kv_read_bytes=kv_tokens * kv_elems * b.kvb, act_in_bytes=b.M * a.num_heads * a.head_dim * b.ab,
        act_out_bytes=b.M * a.num_heads * a.v_head_dim * b.ab,
        shape=(b.M, a.num_heads, a.num_kv_heads, a.head_dim),
        attrs={"window": a.window, "sinks": a.sinks, "k_eq_v": a.k_eq_v, "contexts": ph.contexts,
               "new_tokens": ph.new_tokens, "attended_keys": attended, "scale": 1.0 if a.v_norm else None},
    )
    o = b.matmul(f"L{L}.o_proj", L, att, a.num_heads * a.v_head_dim, h, f"{pre}.self_attn.o_proj", bias=a.o_bias)
    return _close_block(b, L, o, x, "post_attention_layernorm", "attn")


def _mla_core(b: _Builder, layer: LayerSpec, n: str, x: str) -> str:
    """MLA in absorbed form: attention runs over the latent (kv_lora + rope) per head."""
    a, L, h, ph = layer.attention, layer.index, b.m.hidden_size, b.phase
    pre = f"layers.{L}.self_attn"
    H, lat = a.num_heads, a.kv_lora_rank + a.qk_rope_head_dim
    if a.q_lora_rank:
        qa = b.matmul(f"L{L}.q_a_proj", L, n, h, a.q_lora_rank, f"{pre}.q_a_proj")
        qa = b.norm(f"L{L}.q_a_norm", L, qa, a.q_lora_rank, f"{pre}.q_a_layernorm")
        q = b.matmul(f"L{L}.q_b_proj", L, qa, a.q_lora_rank, H * a.head_dim, f"{pre}.q_b_proj")
    else:
        q = b.matmul(f"L{L}.q_proj", L, n, h, H * a.head_dim, f"{pre}.q_proj")
    kva = b.matmul(f"L{L}.kv_a_proj", L, n, h, lat, f"{pre}.kv_a_proj_with_mqa")
    kva = b.norm(f"L{L}.kv_a_norm", L, kva, a.kv_lora_rank, f"{pre}.kv_a_layernorm")
    # W_UK absorbed into the query: per head [nope] x [nope, kv_lora]
    qabs = b.head_matmul(f"L{L}.q_absorb", L, q, H, a.qk_nope_head_dim, a.kv_lora_rank, f"{pre}.kv_b_proj#uk")
    r = b.pointwise(f"L{L}.rope", "rope", L, (qabs, kva), H * a.qk_rope_head_dim + a.qk_rope_head_dim,
                    theta=a.rope_theta, head_dim=a.qk_rope_head_dim)
    w = b.add(name=f"L{L}.kv_write", kind="kv_write", layer=L, inputs=(r,), tokens=b.M, flops=0.0,
              kv_write_bytes=b.M * lat * b.kvb, act_in_bytes=b.M * lat * b.ab, shape=(b.M, lat),
              attrs={"mla": True})
    attended, kv_tokens = b.attention_reads(a.window)
    att = b.add(
        name=f"L{L}.attention", kind="attention", layer=L, inputs=(r, w), tokens=b.M,
        flops=2.0 * H * (lat + a.kv_lora_rank) * attended, kv_read_bytes=kv_tokens * lat * b.kvb,
        act_in_bytes=b.M * H * lat * b.ab, act_out_bytes=b.M * H * a.kv_lora_rank * b.ab,
        shape=(b.M, H, 1, lat), attrs={"mla": True, "window": a.window, "contexts": ph.contexts,
                                      "new_tokens": ph.new_tokens, "attended_keys": attended},
    )
    vup = b.head_matmul(f"L{L}.v_absorb", L, att, H, a.kv_lora_rank, a.v_head_dim, f"{pre}.kv_b_proj#uv")
    o = b.matmul(f"L{L}.o_proj", L, vup, H * a.v_head_dim, h, f"{pre}.o_proj")
    return _close_block(b, L, o, x, "", "attn")


def _close_block(b: _Builder, L: int, out: str, residual: str, post_norm: str, tag: str) -> str:
    h = b.m.hidden_size
    if post_norm and b.m.layers[L].num_norms == 4:
        out = b.norm(f"L{L}.{tag}_post_norm", L, out, h, f"layers.{L}.{post_norm}")
    return b.pointwise(f"L{L}.{tag}_residual", "residual", L, (out, residual), h)


def _mlp(b: _Builder, L: int, x: str, inter: int, f: FfnSpec, weight_pre: str, tag: str) -> str:
    h = b.m.hidden_size
    gu = b.matmul(f"L{L}.{tag}gate_up", L, x, h, 2 * inter, f"{weight_pre}.gate_up_proj", fused=("gate", "up"))
    act = b.pointwise(f"L{L}.{tag}act", "elementwise", L, (gu,), inter, fn=f.activation, gated=True,
                      limit=f.swiglu_limit)
    return b.matmul(f"L{L}.{tag}down", L, act, inter, h, f"{weight_pre}.down_proj")


def _ffn_block(b: _Builder, layer: LayerSpec, x: str) -> str:
    f, L, h = layer.ffn, layer.index, b.m.hidden_size
    pre_name = "pre_feedforward_layernorm" if layer.num_norms == 4 else "post_attention_layernorm"
    n = b.norm(f"L{L}.ffn_norm", L, x, h, f"layers.{L}.{pre_name}")
    if not f.is_moe:
        out = _mlp(b, L, n, f.intermediate, f, f"layers.{L}.mlp", "")
        return _close_block(b, L, out, x, "post_feedforward_layernorm", "ffn")
    parts: list[str] = []
    if f.dense_beside_experts:
        parts.append(_mlp(b, L, n, f.intermediate, f, f"layers.{L}.mlp", "dense_"))
    if f.num_shared_experts:
        parts.append(_mlp(b, L, n, f.num_shared_experts * f.expert_intermediate, f,
                          f"layers.{L}.mlp.shared_experts", "shared_"))
    router = b.add(
        name=f"L{L}.router", kind="router", layer=L, inputs=(n,), tokens=b.M, flops=2.0 * b.M * h * f.num_experts,
        weight_bytes=h * f.num_experts * b.wb, act_in_bytes=b.M * h * b.ab, act_out_bytes=b.M * f.top_k * 8,
        shape=(b.M, h, f.num_experts), weight=f"layers.{L}.mlp.gate",
        attrs={"num_experts": f.num_experts, "top_k": f.top_k, "bias": f.router_bias,
               "scoring": "softmax", "renormalize": _router_renormalizes(b.m)},
    )
    mats = 3 if f.gated else 2
    expert_params = mats * h * f.expert_intermediate
    touched = expected_experts_touched(f.num_experts, f.top_k, b.M)
    experts = b.add(
        name=f"L{L}.experts", kind="experts", layer=L, inputs=(n, router), tokens=b.M,
        flops=2.0 * b.M * f.top_k * expert_params, weight_bytes=touched * expert_params * b.wb,
        act_in_bytes=b.M * f.top_k * h * b.ab, act_out_bytes=b.M * h * b.ab,
        shape=(b.M * f.top_k, h, f.expert_intermediate), weight=f"layers.{L}.mlp.experts",
        attrs={"num_experts": f.num_experts, "top_k": f.top_k, "expert_params": expert_params,
               "expert_bytes": expert_params * b.wb, "expected_experts": touched,
               "intermediate": f.expert_intermediate, "fn": f.activation, "bias": f.expert_bias},
    )
    parts.append(experts)
    out = parts[0] if len(parts) == 1 else b.pointwise(f"L{L}.ffn_combine", "elementwise", L, tuple(parts), h,
                                                       fn="add")
    return _close_block(b, L, out, x, "post_feedforward_layernorm", "ffn")


def _head(b: _Builder, x: str) -> None:
    m, L = b.m, b.m.num_layers
    n = b.norm("final_norm", L, x, m.hidden_size, "norm")
    weight = "embed_tokens" if m.tie_embeddings else "lm_head"
    # Only the last position of each sequence needs logits in prefill; verify needs all k+1.
    rows = b.phase.sequences if b.phase.kind == "prefill" else b.M
    logits = b.add(
        name="logits", kind="matmul", layer=L, inputs=(n,), tokens=rows, flops=2.0 * rows * m.hidden_size * m.vocab_size,
        weight_bytes=m.hidden_size * m.vocab_size * b.wb, act_in_bytes=rows * m.hidden_size * b.ab,
        act_out_bytes=rows * m.vocab_size * 4, shape=(rows, m.hidden_size, m.vocab_size), weight=weight,
        attrs={"softcap": m.final_logit_softcap, "last_only": b.phase.kind == "prefill"},
    )
    b.add(name="sample", kind="sample", layer=L, inputs=(logits,), tokens=rows, flops=float(rows * m.vocab_size),
          act_in_bytes=rows * m.vocab_size * 4, act_out_bytes=rows * 4, shape=(rows, m.vocab_size),
          attrs={"softcap": m.final_logit_softcap, "method": "greedy"})


def layer_templates(model: ModelSpec) -> tuple[int, ...]:
    """For each layer, the first layer lowered to the same ops but for their names and layer index: every
    field of its LayerSpec but the index is equal (a model's layers repeat a few kinds: DeepSeek-R1's 61 are
    two). A layer whose spec cannot be compared is its own template."""
    first: dict[tuple, int] = {}
    out: list[int] = []
    for layer in model.layers:
        key = (layer.kind, layer.attention, layer.ffn, layer.num_norms)
        try:
            out.append(first.setdefault(key, layer.index))
        except TypeError:  # an unhashable field
            out.append(layer.index)
    return tuple(out)


def lower(
    model: ModelSpec,
    phase: Phase,
    weights: str = "fp8",
    kv: str = "bf16",
    kv_layout: str = "separate",
    activations: str = "bf16",
    part: str = "all",
    layers: tuple[int, ...] | None = None,
) -> OpGraph:
    """Lower one step of `model` (decode, prefill chunk or verification) into an OpGraph.

    `part` (attention/FFN disaggregation): "all" is the whole model; "attention" keeps the
    embedding, every attention block and the head (no FFN); "ffn" keeps only every layer's
    FFN/MoE block (experts included), fed by a `hidden_in` op: the hidden state that arrives
    from the attention side (no embedding weights, no head, no sampled token). `layers`: just these
    layers' blocks, e.g. one layer's FFN program for the emulator (fed by `hidden_in`), or the first layer
    of each kind (`layer_templates`) for a cost plan; the embedding and head stay as `part` says, and
    outside the FFN part the ops are exactly the whole graph's ops of those layers.
    """
    from lpxsim.core.errors import UserError

    if phase.sequences <= 0 or phase.new_tokens <= 0:
        raise UserError("batch", "a step needs at least one sequence and one new token")
    if part not in ("all", "attention", "ffn"):
        raise UserError("part", f"expected all, attention or ffn, got {part!r}")
    if layers is not None and any(not 0 <= i < model.num_layers for i in layers):
        raise UserError("layers", f"a layer subset needs layers in 0..{model.num_layers - 1}")
    b = _Builder(model, phase, weights, kv, kv_layout, activations)
    h = model.hidden_size
    if part == "ffn":  # named as the step input it is (the verifier's STEP_INPUTS: nothing on the rack writes it)
        x = b.add(name="tokens", kind="embed", layer=-1, inputs=(), tokens=b.M, flops=0.0,
                  act_in_bytes=b.M * h * b.ab, act_out_bytes=b.M * h * b.ab, shape=(b.M, h),
                  attrs={"hidden_in": True, "scale": 1.0})
    else:
        x = b.add(name="embed", kind="embed", layer=-1, inputs=(), tokens=b.M, flops=0.0,
                  weight_bytes=b.M * h * b.wb, act_out_bytes=b.M * h * b.ab,
                  shape=(b.M, h), weight="embed_tokens",
                  attrs={"scale": h**0.5 if model.model_type.startswith("gemma") else 1.0})
    for layer in model.layers:
        if layers is not None and layer.index not in layers:
            if part != "ffn":  # the next layer reads this one's output by the name it would have
                x = f"L{layer.index}.{'attn' if part == 'attention' else 'ffn'}_residual"
            continue
        if part != "ffn":
            x = _attention_block(b, layer, x)
        if part != "attention":
            x = _ffn_block(b, layer, x)
    if part != "ffn":
        _head(b, x)
    return OpGraph(model=model, phase=phase, weights=weights, kv=kv, kv_layout=kv_layout,
                   act_bytes_per_element=b.ab, ops=b.ops)
