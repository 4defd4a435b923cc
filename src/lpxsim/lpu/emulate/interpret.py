"""Execute an OpGraph directly, unsplit, on numpy: the graph's semantics checked against Hugging Face.

This is the single-chip meaning of every op kind. The Program executor runs
the same kernels on the slices a compiled Program assigns to each chip; this
interpreter is what they must add up to. Rows of a step are sequence-major:
sequence s owns rows [s * new, (s + 1) * new).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lpxsim.graph import Op, OpGraph
from lpxsim.lpu.emulate import kernels as K
from lpxsim.specs.model import ModelSpec

F32 = np.float32


@dataclass
class KVCache:
    """Per layer, per sequence: keys [KVH, T, D] and values [KVH, T, Dv] in float32."""

    keys: dict[int, list[np.ndarray]] = field(default_factory=dict)
    values: dict[int, list[np.ndarray]] = field(default_factory=dict)

    def append(self, layer: int, seq: int, k: np.ndarray, v: np.ndarray) -> None:
        ks, vs = self.keys.setdefault(layer, []), self.values.setdefault(layer, [])
        while len(ks) <= seq:
            ks.append(np.zeros((k.shape[0], 0, k.shape[2]), F32))
            vs.append(np.zeros((v.shape[0], 0, v.shape[2]), F32))
        ks[seq] = np.concatenate([ks[seq], k], axis=1)
        vs[seq] = np.concatenate([vs[seq], v], axis=1)

    def length(self, layer: int, seq: int) -> int:
        ks = self.keys.get(layer, [])
        return ks[seq].shape[1] if seq < len(ks) else 0


def positions(contexts: tuple[int, ...], new: int) -> np.ndarray:
    """Absolute positions of the step's rows, sequence-major."""
    return np.concatenate([np.arange(c, c + new, dtype=np.int64) for c in contexts])


def check_supported(model: ModelSpec) -> None:
    """Raise NotImplementedError for architectures whose numerics the kernels do not follow."""
    for layer in model.layers:
        a, f = layer.attention, layer.ffn
        if a.kind == "mla":
            raise NotImplementedError("MLA attention is not emulated")
        if a.sinks or a.qkv_bias or a.o_bias or f.expert_bias or f.router_bias or f.swiglu_limit:
            raise NotImplementedError("attention sinks, biases and clamped SwiGLU are not emulated")
        if f.is_moe and (f.num_shared_experts or f.dense_beside_experts):
            raise NotImplementedError("shared experts / a dense MLP beside experts are not emulated")


def split_qk(r: np.ndarray, op_attrs: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Split a rope op's output [M, (H + KVH) * D] into q [M, H, D] and k [M, KVH, D]."""
    H, D = int(op_attrs["heads"]), int(op_attrs["head_dim"])
    M = r.shape[0]
    return r[:, : H * D].reshape(M, H, D), r[:, H * D :].reshape(M, -1, D)


class GraphInterpreter:
    """Runs decode steps and prefill chunks of one model, keeping its own KV cache."""

    def __init__(self, model: ModelSpec, weights: Mapping[str, np.ndarray]) -> None:
        check_supported(model)
        self.model = model
        self.w = weights
        self.cache = KVCache()

    def run(self, graph: OpGraph, token_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Execute one step; returns (logits [rows, vocab], greedy tokens [rows])."""
        ph = graph.phase
        if len(token_ids) != ph.tokens:
            raise ValueError(f"step needs {ph.tokens} token ids, got {len(token_ids)}")
        self.pos = positions(ph.contexts, ph.new_tokens)
        self.ids = np.asarray(token_ids, dtype=np.int64)
        self.phase = ph
        vals: dict[str, Any] = {}
        for op in graph:
            vals[op.name] = self._eval(op, [vals[i] for i in op.inputs])
        return vals["logits"], vals["sample"]

    # --- one op -----------------------------------------------------------------------
    def _eval(self, op: Op, args: list[Any]) -> Any:
        at = op.attrs
        if op.kind == "embed":
            return (self.w[op.weight][self.ids] * F32(at.get("scale", 1.0))).astype(F32)
        if op.kind == "norm":
            w = self.w[op.weight] if op.weight else None
            return K.rms_norm(args[0], w, at["eps"], int(at.get("per_head", 0) or 0))
        if op.kind == "matmul":
            return self._matmul(op, args[0])
        if op.kind == "rope":
            return self._rope(op, args[0], args[1])
        if op.kind == "kv_write":
            return self._kv_write(op, args[0], args[1])
        if op.kind == "attention":
            return self._attention(op, args[0])
        if op.kind == "elementwise":
            if at.get("fn") == "add":
                return np.sum(args, axis=0, dtype=F32)
            return K.gated(args[0], at["fn"]) if at.get("gated") else K.activation(args[0], at["fn"])
        if op.kind == "residual":
            return (args[0] + args[1]).astype(F32)
        if op.kind == "router":
            logits = args[0] @ self.w[op.weight].T
            return K.softmax_topk(logits, int(at["top_k"]), bool(at.get("renormalize", True)))
        if op.kind == "experts":
            return self._experts(op, args[0], args[1])
        if op.kind == "sample":
            return np.argmax(args[0], axis=-1)
        raise NotImplementedError(f"op kind {op.kind!r}")

    def _matmul(self, op: Op, x: np.ndarray) -> np.ndarray:
        if op.attrs.get("last_only"):  # prefill logits: last row of each sequence
            n = self.phase.new_tokens
            x = x[n - 1 :: n]
        y = (x @ self.w[op.weight].T).astype(F32)
        return K.softcap(y, op.attrs.get("softcap")) if "softcap" in op.attrs else y

    def _rope(self, op: Op, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        at = op.attrs
        D = int(at["head_dim"])
        inv = K.rope_inv_freq(D, float(at["theta"]), float(at["partial"]), str(at.get("rope_type", "default")))
        cos, sin = K.rope_cos_sin(self.pos, inv)
        M = q.shape[0]
        qr = K.apply_rope(q.reshape(M, -1, D), cos, sin).reshape(M, -1)
        kr = K.apply_rope(k.reshape(M, -1, D), cos, sin).reshape(M, -1)
        return np.concatenate([qr, kr], axis=-1)

    def _kv_write(self, op: Op, r: np.ndarray, v: np.ndarray) -> None:
        a = self.model.layers[op.layer].attention
        _, k = split_qk(r, {"heads": a.num_heads, "head_dim": a.head_dim})
        M, n = r.shape[0], self.phase.new_tokens
        vv = v.reshape(M, a.num_kv_heads, a.v_head_dim)
        for s in range(self.phase.sequences):
            rows = slice(s * n, (s + 1) * n)
            self.cache.append(op.layer, s, k[rows].transpose(1, 0, 2), vv[rows].transpose(1, 0, 2))

    def _attention(self, op: Op, r: np.ndarray) -> np.ndarray:
        a = self.model.layers[op.layer].attention
        q, _ = split_qk(r, {"heads": a.num_heads, "head_dim": a.head_dim})
        n, outs = self.phase.new_tokens, []
        for s in range(self.phase.sequences):
            rows = slice(s * n, (s + 1) * n)
            keys, vals = self.cache.keys[op.layer][s], self.cache.values[op.layer][s]
            k_pos = np.arange(keys.shape[1], dtype=np.int64)
            outs.append(K.attention(q[rows], keys, vals, self.pos[rows], k_pos, op.attrs.get("window"),
                                    op.attrs.get("scale")))
        return np.concatenate(outs, axis=0)

    def _experts(self, op: Op, x: np.ndarray, routed: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        weights, idx = routed
        gu, dn = self.w[f"{op.weight}.gate_up_proj"], self.w[f"{op.weight}.down_proj"]
        out = np.zeros_like(x)
        for e in np.unique(idx):
            rows, slot = np.nonzero(idx == e)
            y = K.expert_ffn(x[rows], gu[e], dn[e], op.attrs["fn"])
            np.add.at(out, rows, y * weights[rows, slot][:, None])
        return out.astype(F32)
