"""Measured GPU op times from aiconfigurator-core's silicon tables (Apache-2.0, pinned 0.12.0).

aiconfigurator-core ships, per GPU and serving framework, parquet tables of kernel
latencies measured on the real part: GEMMs (m, n, k, dtype), grouped MoE (tokens,
hidden, intermediate, top-k, experts, moe_tp, moe_ep, routing distribution), MLA
decode/prefill attention (batch, heads per GPU, context), GQA attention, the MLA
absorb BMMs and custom all-reduce (GPUs, message bytes). This module reads only
the tables a query needs (lazily, once per process) and interpolates inside them
log-log between the measured grid points; beyond the grid it scales the edge
point by the work ratio (linear in tokens/bytes). A query the tables cannot
answer returns None and the caller falls back to its roofline.

GPUs without tables (Vera Rubin, AMD parts) borrow a measured sibling's times
scaled by sourced spec ratios (`projection.py`).
"""

from __future__ import annotations

import bisect
import math
import re
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import numpy as np

# lpxsim system name -> aiconfigurator-core system folder (the same silicon)
AIC_SYSTEM = {
    "h100-hgx": "h100_sxm",
    "h200-hgx": "h200_sxm",
    "b200-hgx": "b200_sxm",
    "b300-hgx": "b300_sxm",
    "gb200-nvl72": "gb200",
    "gb300-nvl72": "gb300",
}
FRAMEWORKS = ("sglang", "trtllm", "vllm")
# our weight formats -> table dtypes. DeepSeek-style FP8 checkpoints are block-scaled (128x128),
# which is what the engines run; NVFP4 is NVIDIA's 4-bit format (assumption "gpu-measured-dtypes").
GEMM_DTYPE = {"fp8": ("fp8_block", "fp8"), "bf16": ("bfloat16",), "fp16": ("bfloat16",),
              "fp4": ("nvfp4",), "mxfp4": ("nvfp4",), "int8": ("fp8",)}
MOE_DTYPE = {"fp8": ("fp8_block", "fp8"), "bf16": ("bfloat16",), "fp16": ("bfloat16",),
             "fp4": ("nvfp4", "w4a8_mxfp4_mxfp8"), "mxfp4": ("w4a8_mxfp4_mxfp8", "nvfp4")}
KV_DTYPE = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}
# Routed tokens are not uniform over experts; aiconfigurator's default workload (assumption
# "gpu-moe-distribution") is a power law with exponent 1.01, the mildest skew it measured.
MOE_DISTRIBUTION = ("power_law_1.01", "balanced")


@cache
def data_root() -> Path | None:
    """aiconfigurator-core's systems/data folder (found without importing the package)."""
    spec = find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "systems" / "data"
    return root if root.is_dir() else None


def aic_version() -> str:
    """Installed aiconfigurator-core version (part of the cost model's cache key)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aiconfigurator-core")
    except PackageNotFoundError:
        return "absent"


def _vkey(v: str) -> tuple:
    return tuple(int(x) if x.isdigit() else -1 for x in re.split(r"[.a-z]+", v) if x)


@cache
def _table_path(system: str, family: str, framework: str, filename: str) -> Path | None:
    """Newest version folder of `family/framework` holding `filename`."""
    root = data_root()
    if root is None:
        return None
    base = root / system / family / framework
    if not base.is_dir():
        return None
    for d in sorted(base.iterdir(), key=lambda p: _vkey(p.name), reverse=True):
        if (d / filename).is_file():
            return d / filename
    return None


@cache
def _columns(system: str, family: str, framework: str, filename: str, cols: tuple[str, ...]) -> dict | None:
    """Columns of one table as numpy arrays (read once per process); None if absent."""
    p = _table_path(system, family, framework, filename)
    if p is None:
        return None
    import pyarrow.parquet as pq

    t = pq.read_table(p, columns=list(cols))
    return {c: t.column(c).to_numpy(zero_copy_only=False) for c in cols}


def _interp(xs: np.ndarray, ys: np.ndarray, x: float) -> float:
    """Log-log interpolation on sorted (xs, ys); beyond the last point, linear in x (work-proportional);
    below the first, the first point (launch-bound floor)."""
    if x <= xs[0]:
        return float(ys[0])
    if x >= xs[-1]:
        return float(ys[-1] * x / xs[-1])
    i = bisect.bisect_right(xs.tolist(), x)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    w = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return float(math.exp((1 - w) * math.log(y0) + w * math.log(y1)))


def _curve(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique (x, median y) of one measured curve, made non-decreasing in x.

    More work never takes less time: a smaller problem can always run the larger one's kernel
    padded, so a measured point above a later one is timing noise (e.g. a GEMM at m = 1 slower
    than at m = 8); each point is capped by the smallest time measured at any larger x.
    """
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    ux, idx = np.unique(x, return_index=True)
    uy = np.array([np.median(y[a:b]) for a, b in zip(idx, list(idx[1:]) + [len(x)], strict=True)])
    uy = np.minimum.accumulate(uy[::-1])[::-1]
    return ux.astype(float), uy.astype(float)


def _first(options: tuple[str, ...], present: np.ndarray) -> str | None:
    have = set(present.tolist())
    return next((o for o in options if o in have), None)


MS = 1e-3  # the tables hold milliseconds


class MeasuredOps:
    """Op-time lookups in one GPU's tables for one framework (seconds; None where not measured)."""

    def __init__(self, aic_system: str, framework: str) -> None:
        self.system, self.framework = aic_system, framework

    def _cols(self, family: str, filename: str, cols: tuple[str, ...]) -> dict | None:
        return _columns(self.system, family, self.framework, filename, cols)

    @cache  # noqa: B019 - a few instances per process, each lives as long as the process
    def gemm(self, m: int, n: int, k: int, weights: str) -> float | None:
        """An (m x k) @ (k x n) GEMM with `weights`-format weights."""
        t = self._cols("gemm", "gemm_perf.parquet", ("gemm_dtype", "m", "n", "k", "latency"))
        if t is None:
            return None
        dt = _first(GEMM_DTYPE.get(weights, ()), t["gemm_dtype"])
        if dt is None:
            return None
        sel = t["gemm_dtype"] == dt
        ns, ks = t["n"][sel], t["k"][sel]
        pairs = np.unique(np.stack([ns, ks], axis=1), axis=0)
        d = np.abs(np.log(pairs[:, 0] / n)) + np.abs(np.log(pairs[:, 1] / k))
        n0, k0 = pairs[int(np.argmin(d))]
        row = sel & (t["n"] == n0) & (t["k"] == k0)
        xs, ys = _curve(t["m"][row], t["latency"][row])
        return _interp(xs, ys, m) * (n * k) / (float(n0) * float(k0)) * MS

    @cache  # noqa: B019
    def moe(self, tokens: int, hidden: int, inter: int, topk: int, experts: int, moe_tp: int, moe_ep: int,
            weights: str) -> float | None:
        """Grouped routed-expert FFN for `tokens` tokens entering the MoE layer."""
        cols = ("moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                "moe_ep_size", "distribution", "latency")
        t = self._cols("moe", "moe_perf.parquet", cols)
        if t is None:
            return None
        sel = ((t["hidden_size"] == hidden) & (t["inter_size"] == inter) & (t["topk"] == topk)
               & (t["num_experts"] == experts) & (t["moe_tp_size"] == moe_tp) & (t["moe_ep_size"] == moe_ep))
        if not sel.any():
            return None
        dt = _first(MOE_DTYPE.get(weights, ()), t["moe_dtype"][sel])
        dist = _first(MOE_DISTRIBUTION, t["distribution"][sel])
        if dt is None or dist is None:
            return None
        row = sel & (t["moe_dtype"] == dt) & (t["distribution"] == dist)
        xs, ys = _curve(t["num_tokens"][row], t["latency"][row])
        return _interp(xs, ys, tokens) * MS

    @cache  # noqa: B019
    def mla(self, phase: str, batch: int, context: int, heads: int, kv: str) -> float | None:
        """MLA attention core on one GPU: `heads` local heads; decode: batch x one token over `context`
        cached tokens; prefill: batch x `context` new tokens from empty."""
        fname = "generation_mla_perf.parquet" if phase == "decode" else "context_mla_perf.parquet"
        axis = "step" if phase == "decode" else "isl"
        t = self._cols("mla", fname, ("kv_cache_dtype", "num_heads", "batch_size", axis, "latency"))
        if t is None:
            return None
        sel = (t["kv_cache_dtype"] == KV_DTYPE.get(kv, "bfloat16")) & (t["num_heads"] == heads)
        if not sel.any():
            return None
        return self._grid2(t["batch_size"][sel], t[axis][sel], t["latency"][sel], batch, context) * MS

    @cache  # noqa: B019
    def attention(self, phase: str, batch: int, context: int, heads: int, kv_heads: int, head_dim: int,
                  kv: str) -> float | None:
        """GQA/MHA attention core (full attention) on one GPU with `heads`/`kv_heads` local heads."""
        fname = "generation_attention_perf.parquet" if phase == "decode" else "context_attention_perf.parquet"
        axis = "step" if phase == "decode" else "isl"
        cols = ("kv_cache_dtype", "num_heads", "num_key_value_heads", "head_dim", "window_size", "batch_size",
                axis, "latency")
        t = self._cols("attention", fname, cols)
        if t is None:
            return None
        sel = ((t["kv_cache_dtype"] == KV_DTYPE.get(kv, "bfloat16")) & (t["num_heads"] == heads)
               & (t["num_key_value_heads"] == kv_heads) & (t["head_dim"] == head_dim) & (t["window_size"] == 0))
        if not sel.any():
            return None
        return self._grid2(t["batch_size"][sel], t[axis][sel], t["latency"][sel], batch, context) * MS

    @cache  # noqa: B019
    def mla_bmm(self, which: str, tokens: int, heads: int, weights: str) -> float | None:
        """MLA's per-head absorb BMM ("pre": q_absorb, "post": v_absorb)."""
        t = self._cols("mla_bmm", "mla_bmm_perf.parquet", ("op_name", "bmm_dtype", "num_tokens", "num_heads", "latency"))
        if t is None:
            return None
        dt = "fp8" if weights in ("fp8", "fp4", "mxfp4") else "bfloat16"
        sel = (t["op_name"] == f"mla_gen_{which}") & (t["bmm_dtype"] == dt) & (t["num_heads"] == heads)
        if not sel.any():
            return None
        xs, ys = _curve(t["num_tokens"][sel], t["latency"][sel])
        return _interp(xs, ys, tokens) * MS

    @cache  # noqa: B019
    def all_reduce(self, nbytes: int, gpus: int, graphs: bool) -> float | None:
        """One all-reduce of `nbytes` over `gpus` GPUs (the framework's custom all-reduce)."""
        t = self._cols("comm", "custom_allreduce_perf.parquet", ("kernel_source", "num_gpus", "message_size", "latency"))
        if t is None:
            return None
        src = t["kernel_source"].astype(str)
        want = np.char.find(src.astype("U"), "graph" if graphs else "eager") >= 0
        sel = (t["num_gpus"] == gpus) & (want if want.any() else True)
        if not np.any(sel):
            return None
        xs, ys = _curve(t["message_size"][sel], t["latency"][sel])
        return _interp(xs, ys, nbytes) * MS

    @staticmethod
    def _grid2(bs: np.ndarray, ss: np.ndarray, lat: np.ndarray, b: float, s: float) -> float:
        """Interpolate a (batch, length) table: along length per measured batch, then across batch."""
        ub = np.unique(bs)
        lo = ub[ub <= b].max() if (ub <= b).any() else ub.min()
        hi = ub[ub >= b].min() if (ub >= b).any() else ub.max()
        vals = []
        for bb in (lo, hi):
            m = bs == bb
            xs, ys = _curve(ss[m], lat[m])
            vals.append(_interp(xs, ys, max(1.0, s)))
        if lo == hi:
            return vals[0] * (b / lo if b > hi else 1.0)
        w = (math.log(b) - math.log(lo)) / (math.log(hi) - math.log(lo))
        return float(math.exp((1 - w) * math.log(vals[0]) + w * math.log(vals[1])))


@cache
def measured_ops(aic_system: str, framework: str) -> MeasuredOps:
    """The (process-wide) lookup object of one GPU and framework."""
    return MeasuredOps(aic_system, framework)
