"""float32 numpy kernels with the numerical semantics of the Hugging Face model classes.

Each kernel follows one HF module (RMSNorm, rotary embedding, eager attention,
gated MLP, top-k router, grouped experts, logit soft-capping) closely enough
that the only differences left are float32 summation order. Both the unsplit
graph interpreter and the Program executor call these on whole tensors or on
the slices a Program gives a chip.
"""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32


def rms_norm(x: np.ndarray, weight: np.ndarray | None, eps: float, per_head: int = 0) -> np.ndarray:
    """RMSNorm over the last axis (or over each `per_head`-wide group of it); `weight=None` = no scale."""
    shape = x.shape
    if per_head:
        x = x.reshape(*shape[:-1], shape[-1] // per_head, per_head)
    ms = np.mean(np.square(x, dtype=F32), axis=-1, keepdims=True, dtype=F32) + F32(eps)
    y = x * np.power(ms, F32(-0.5), dtype=F32)
    if weight is not None:
        y = y * weight.astype(F32)
    return y.reshape(shape).astype(F32, copy=False)


def rope_inv_freq(head_dim: int, theta: float, partial: float, rope_type: str) -> np.ndarray:
    """Inverse frequencies for one head, length head_dim/2 (HF `rope_init_fn`s, float32)."""
    if rope_type == "proportional":  # Gemma 4 global layers: rotate a fraction, the rest get frequency 0
        angles = int(partial * head_dim // 2)
        rot = 1.0 / (theta ** (np.arange(0, 2 * angles, 2, dtype=np.int64).astype(F32) / F32(head_dim)))
        return np.concatenate([rot.astype(F32), np.zeros(head_dim // 2 - angles, F32)])
    if rope_type != "default" or partial != 1.0:
        raise NotImplementedError(f"rope_type {rope_type!r} with partial {partial} is not emulated")
    return (1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.int64).astype(F32) / F32(head_dim)))).astype(F32)


def rope_cos_sin(positions: np.ndarray, inv_freq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """cos/sin tables [M, head_dim] for integer positions, computed in float32 as HF does."""
    freqs = positions.astype(F32)[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb).astype(F32), np.sin(emb).astype(F32)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate [M, heads, head_dim] with rotate_half (first half / second half pairing)."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return (x * cos[:, None, :] + rotated * sin[:, None, :]).astype(F32)


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    q_pos: np.ndarray,
    k_pos: np.ndarray,
    window: int | None,
    scale: float | None,
) -> np.ndarray:
    """Causal (optionally sliding-window) GQA attention for one sequence.

    q [M, H, D], k [KVH, T, D], v [KVH, T, Dv]; returns [M, H * Dv]. A query at
    position p sees keys at positions p - window < j <= p (HF's sliding mask).
    """
    M, H, D = q.shape
    kvh = k.shape[0]
    group = H // kvh
    s = F32(D**-0.5 if scale is None else scale)
    kk = np.repeat(k, group, axis=0)  # [H, T, D], head h uses kv head h // group
    vv = np.repeat(v, group, axis=0)
    scores = np.einsum("mhd,htd->hmt", q, kk, dtype=F32) * s
    visible = k_pos[None, :] <= q_pos[:, None]
    if window is not None:
        visible &= (q_pos[:, None] - k_pos[None, :]) < window
    scores = np.where(visible[None], scores, F32(-np.inf))
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores, dtype=F32)
    p = p / p.sum(axis=-1, keepdims=True, dtype=F32)
    out = np.einsum("hmt,htd->mhd", p, vv, dtype=F32)
    return out.reshape(M, H * vv.shape[-1]).astype(F32)


def attention_lse(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    q_pos: np.ndarray,
    k_pos: np.ndarray,
    window: int | None,
    scale: float | None,
    group: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Attention of q [M, h, D] over a chunk of keys k [kvh, T, D] / v [kvh, T, Dv] with their log-sum-exp.

    `group` query heads share one KV head (q head i uses k head i // group of
    this slice). Returns o [M, h * Dv] normalised over the chunk and lse [M, h]
    (-inf where a row sees no key of the chunk, with o = 0 there), so that
    chunks merge exactly with `merge_lse`.
    """
    M, H, D = q.shape
    s = F32(D**-0.5 if scale is None else scale)
    kk = np.repeat(k, group, axis=0)
    vv = np.repeat(v, group, axis=0)
    scores = np.einsum("mhd,htd->hmt", q, kk, dtype=F32) * s
    visible = k_pos[None, :] <= q_pos[:, None]
    if window is not None:
        visible &= (q_pos[:, None] - k_pos[None, :]) < window
    scores = np.where(visible[None], scores, F32(-np.inf))
    mx = scores.max(axis=-1, keepdims=True) if scores.shape[-1] else np.full((H, M, 1), -np.inf, F32)
    safe = np.where(np.isfinite(mx), mx, F32(0.0))
    p = np.exp(scores - safe, dtype=F32)
    denom = p.sum(axis=-1, keepdims=True, dtype=F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        pn = np.where(denom > 0, p / denom, F32(0.0))
        lse = np.where(denom[..., 0] > 0, np.log(denom[..., 0]) + safe[..., 0], F32(-np.inf))
    out = np.einsum("hmt,htd->mhd", pn, vv, dtype=F32)
    return out.reshape(M, H * vv.shape[-1]).astype(F32), lse.T.astype(F32)


def merge_lse(parts: list[tuple[np.ndarray, np.ndarray]], dv: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge split-K attention partials: lse = logsumexp_j lse_j, o = sum_j exp(lse_j - lse) o_j per (row, head)."""
    lses = np.stack([lse for _, lse in parts])  # [J, M, h]
    mx = lses.max(axis=0)
    safe = np.where(np.isfinite(mx), mx, F32(0.0))
    wts = np.exp(lses - safe[None], dtype=F32)  # exp(-inf) = 0 for empty chunks
    total = wts.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.where(total > 0, np.log(total) + safe, F32(-np.inf)).astype(F32)
        w = np.where(total[None] > 0, wts / total[None], F32(0.0))
    M, h = mx.shape
    out = np.zeros((M, h, dv), F32)
    for (o, _), wj in zip(parts, w, strict=True):
        out += o.reshape(M, h, dv) * wj[..., None]
    return out.reshape(M, h * dv), lse


def activation(x: np.ndarray, fn: str) -> np.ndarray:
    """HF ACT2FN for the activations the catalog models use."""
    if fn in ("silu", "swish"):
        return (x / (F32(1.0) + np.exp(-x, dtype=F32))).astype(F32)
    if fn in ("gelu_pytorch_tanh", "gelu_new", "gelu_fast"):
        c = F32(math.sqrt(2.0 / math.pi))
        return (F32(0.5) * x * (F32(1.0) + np.tanh(c * (x + F32(0.044715) * x * x * x)))).astype(F32)
    if fn == "gelu":
        from scipy.special import erf

        return (F32(0.5) * x * (F32(1.0) + erf(x / F32(math.sqrt(2.0))).astype(F32))).astype(F32)
    if fn == "relu":
        return np.maximum(x, F32(0.0))
    raise NotImplementedError(f"activation {fn!r} is not emulated")


def gated(gate_up: np.ndarray, fn: str) -> np.ndarray:
    """act(gate) * up for a fused [.., gate | up] input (first half gate, second half up)."""
    half = gate_up.shape[-1] // 2
    return (activation(gate_up[..., :half], fn) * gate_up[..., half:]).astype(F32)


def softmax_topk(logits: np.ndarray, top_k: int, renormalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """Router: softmax over experts, top-k (stable: ties go to the lower index), optional renormalisation."""
    z = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(z, dtype=F32)
    p = p / p.sum(axis=-1, keepdims=True, dtype=F32)
    idx = np.argsort(-p, axis=-1, kind="stable")[:, :top_k]
    w = np.take_along_axis(p, idx, axis=-1)
    if renormalize:
        w = w / w.sum(axis=-1, keepdims=True, dtype=F32)
    return w.astype(F32), idx.astype(np.int64)


def expert_ffn(x: np.ndarray, gate_up: np.ndarray, down: np.ndarray, fn: str) -> np.ndarray:
    """One expert on the rows routed to it: gate_up [2I, H], down [H, I] (HF layout)."""
    return (gated(x @ gate_up.T, fn) @ down.T).astype(F32)


def softcap(x: np.ndarray, cap: float | None) -> np.ndarray:
    """cap * tanh(x / cap); identity when cap is None."""
    if not cap:
        return x
    c = F32(cap)
    return (np.tanh(x / c) * c).astype(F32)
