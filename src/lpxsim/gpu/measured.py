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
# our weight formats -> table dtypes. DeepSeek-style (MLA) FP8 checkpoints are block-scaled (128x128),
# which is what the engines run for them ("fp8_block"); other FP8 checkpoints per-tensor ("fp8");
# NVFP4 is NVIDIA's 4-bit format (assumption "gpu-measured-dtypes").
GEMM_DTYPE = {"fp8": ("fp8", "fp8_block"), "fp8_block": ("fp8_block", "fp8"), "bf16": ("bfloat16",),
              "fp16": ("bfloat16",),
              "fp4": ("nvfp4",), "mxfp4": ("nvfp4",), "int8": ("fp8",)}
MOE_DTYPE = {"fp8": ("fp8_block", "fp8"), "fp8_block": ("fp8_block", "fp8"), "bf16": ("bfloat16",), "fp16": ("bfloat16",),
             "fp4": ("nvfp4", "w4a8_mxfp4_mxfp8"), "mxfp4": ("w4a8_mxfp4_mxfp8", "nvfp4")}
KV_DTYPE = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}
# Routed tokens are not uniform over experts; aiconfigurator's default workload (assumption
# "gpu-moe-distribution") is a power law with exponent 1.01, the mildest skew it measured.
MOE_DISTRIBUTION = ("power_law_1.01", "balanced")
# The MoE backend each table's `kernel_source` times (the engine setting that launches it): TensorRT-LLM's
# `moe_config.backend` TRTLLM (TRTLLMGenFusedMoE, "min-latency" trtllm-gen kernels; fp8 block scales and
# nvfp4 on SM100), CUTLASS and DEEPGEMM; SGLang's `--moe-runner-backend flashinfer_trtllm` (FlashInfer's
# trtllm_fp8_block_scale_moe / trtllm_fp4_block_scale_moe, built from TensorRT-LLM's trtllm-gen MoE sources)
# and its Triton fused MoE (docs/sources.md "TRT-MOE-GEN", "FI-TRTLLM-MOE").
MOE_BACKEND_OF = {
    "moe_torch_flow_min_latency": "trtllm",
    "sglang_flashinfer_trtllm_moe": "trtllm",
    "moe_torch_flow_cutlass": "cutlass",
    "deepgemm": "deepgemm",
    "sglang_fused_moe_triton": "triton",
}
# Backends whose kernels are one library under several engines: a table of one engine prices it for another.
SHARED_MOE_BACKENDS = frozenset({"trtllm"})
# Context-MLA kernel sources whose table timed the weight-absorbed form (query and key 576 dims, value 512, one
# latent KV head), where a fresh prompt runs the MHA form (192 / 128 dims per head): aiconfigurator's SGLang
# collector on Hopper ("flash_attention", SGLang's FA3 backend) sets the absorbed dims for prefill too, where on
# Blackwell it sets the MHA form (docs/sources.md "AIC-MLA-COLLECT"); SGLang prefills a prompt without a cached
# prefix in the MHA form (SGL-MLA-MHA). Such a table is priced from the same GPU's table of `MHA_CONTEXT_FROM`.
ABSORBED_CONTEXT_SOURCES = frozenset({"flash_attention"})
MHA_CONTEXT_FROM = {"sglang": "trtllm"}


def _by_backend(times: dict[str, float]) -> dict[str, float]:
    """{kernel source: seconds} -> {backend: seconds} (the fastest where two sources are one backend)."""
    out: dict[str, float] = {}
    for src, t in times.items():
        b = MOE_BACKEND_OF.get(src, src)
        out[b] = min(t, out.get(b, math.inf))
    return out


# GEMM dtypes a table timed with an untuned kernel, and the engine whose table of the same GPU prices them.
# aiconfigurator's TensorRT-LLM GEMM collector times `Linear.forward` outside TensorRT-LLM's `autotune()`
# context (collector/trtllm/collect_gemm.py; its MoE collector does tune): the NVFP4 GEMM, an autotuned op
# (`trtllm::nvfp4_gemm` picks its tactic through `AutoTuner.choose_one`), runs its fallback tactic there,
# while trtllm-serve tunes every op at warm-up. On B200 the table then has an NVFP4 GEMM slower than the
# FP8 block-scaled one of the same shape at every decode M (512 x 7168: 18.6 vs 10.1 us at M = 1), though
# it streams half the bytes; SGLang's table of the same GPU times it at 8.4 us. Such a GEMM takes the faster
# of the two tables (docs/sources.md "AIC-GEMM-UNTUNED"; assumption "gpu-fp4-gemm-untuned").
UNTUNED_GEMM = {("trtllm", "nvfp4"): "sglang"}
# Same-generation GPUs whose tables may fill each other's missing kernel backends (same SM architecture
# and software stack; `MeasuredOps.moe`). Blackwell B200 <-> Blackwell Ultra B300, and their NVL72 racks.
KERNEL_SIBLING = {"b300_sxm": "b200_sxm", "b200_sxm": "b300_sxm", "gb300": "gb200", "gb200": "gb300"}


@cache
def _hbm_Bps(aic_system: str) -> float:
    """HBM bandwidth of the catalog system aiconfigurator-core calls `aic_system`."""
    from lpxsim.catalog import get_system

    name = next(k for k, v in AIC_SYSTEM.items() if v == aic_system)
    return float(get_system(name).chip.memory_bw_Bps)


# The largest speed-up of an FP4 matmul over the FP8 one of the same shape that a tuned library has shown
# (cuBLAS 12.9 on Blackwell: "up to 2.3x", CUBLAS-129). Blackwell Ultra's datasheet ratio is 3x (15 vs 5 PF
# dense); no kernel measurement shows it, and its own tables gain 1.2x over Blackwell's in FP4 (assumption
# "gpu-fp4-gemm-ceiling").
FP4_OVER_FP8_SHOWN = 2.3


@cache
def _fp8_over_fp4_peak(aic_system: str) -> float | None:
    """Dense FP8 / FP4 tensor-core peak of the catalog system aiconfigurator-core calls `aic_system`, the FP4
    side no faster than FP4_OVER_FP8_SHOWN x FP8 (None where the catalog lacks either)."""
    from lpxsim.catalog import get_system

    name = next(k for k, v in AIC_SYSTEM.items() if v == aic_system)
    peak = get_system(name).chip.peak_flops
    p8, p4 = peak.get("fp8"), peak.get("fp4")
    return max(float(p8) / float(p4), 1.0 / FP4_OVER_FP8_SHOWN) if p8 and p4 else None


@cache
def data_root() -> Path | None:
    """aiconfigurator-core's systems/data folder (found without importing the package)."""
    spec = find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "systems" / "data"
    return root if root.is_dir() else None


@cache
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
def _table_paths(system: str, family: str, framework: str, filename: str) -> tuple[Path, ...]:
    """Every version folder's `family/framework/.../filename`, newest version first."""
    root = data_root()
    if root is None:
        return ()
    base = root / system / family / framework
    if not base.is_dir():
        return ()
    dirs = sorted(base.iterdir(), key=lambda p: _vkey(p.name), reverse=True)
    return tuple(d / filename for d in dirs if (d / filename).is_file())


def _table_path(system: str, family: str, framework: str, filename: str) -> Path | None:
    """Newest version folder of `family/framework` holding `filename`."""
    paths = _table_paths(system, family, framework, filename)
    return paths[0] if paths else None


def _table(system: str, family: str, framework: str, filename: str, cols: tuple[str, ...], version: int = 0):
    """One parquet table (only `cols`) of the `version`-th newest folder holding it (None if absent), as
    ({column: numpy array}, {string column: its distinct values}); see _read."""
    paths = _table_paths(system, family, framework, filename)
    return _read(paths[version], cols) if version < len(paths) else None


@cache
def _read(p: Path, cols: tuple[str, ...]):
    """One parquet table (only `cols`), read once per process; string columns are held as integer
    codes into their distinct values.

    Read through pyarrow's ParquetReader and the arrays' buffers: pyarrow's read_table (pyarrow.dataset) and its
    to_numpy both import pandas, about half a second of a cold `estimate`."""
    import pyarrow as pa

    open_file = _parquet_opener()
    schema = open_file(p, None).schema_arrow
    strings = [c for c in cols if pa.types.is_string(schema.field(c).type) or pa.types.is_large_string(schema.field(c).type)]
    reader = open_file(p, strings)
    # one thread: the tables are small, and a thread pool costs more CPU than it saves here
    t = reader.read_all(column_indices=[reader.column_name_idx(c) for c in cols], use_threads=False)
    arrays, words = {}, {}
    for c in cols:
        col = t.column(c)
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunks[0]
        if c in strings:
            arr = arr if pa.types.is_dictionary(arr.type) else arr.dictionary_encode()
            words[c] = np.array(_strings(arr.dictionary), dtype=str)
            arrays[c] = _primitive(arr.indices)
        else:
            arrays[c] = _primitive(arr)
    return arrays, words


def _parquet_opener():  # -> (path, dictionary columns) -> a pyarrow ParquetReader
    """Open a parquet file with pyarrow's reader class itself: `pyarrow.parquet` (its ParquetFile
    wrapper) also imports pyarrow's filesystems and with them ssl, ~50 ms of a cold start."""
    try:
        from pyarrow._parquet import ParquetReader
    except ImportError:  # a pyarrow without the private module: its public wrapper
        import pyarrow.parquet as pq

        return lambda p, strings: pq.ParquetFile(p, read_dictionary=strings).reader

    def open_file(p: Path, strings: list[str] | None):  # noqa: ANN202
        r = ParquetReader()
        r.open(str(p), read_dictionary=strings)
        return r

    return open_file


_NUMPY_TYPES = {"int8": "i1", "int16": "i2", "int32": "i4", "int64": "i8", "uint8": "u1", "uint16": "u2",
                "uint32": "u4", "uint64": "u8", "float": "f4", "double": "f8"}


def _primitive(arr) -> np.ndarray:  # noqa: ANN001 - a pyarrow Array
    """A null-free primitive Array as numpy straight from its data buffer."""
    dt = _NUMPY_TYPES.get(str(arr.type))
    if dt is None or arr.null_count:
        return arr.to_numpy(zero_copy_only=False)
    return np.frombuffer(arr.buffers()[1], dtype=dt)[arr.offset: arr.offset + len(arr)]


def _strings(d) -> list[str]:  # noqa: ANN001 - a pyarrow (large_)string Array
    """The values of a small string Array, decoded from its offset and data buffers."""
    import pyarrow as pa

    if d.null_count:
        return [str(v) for v in d.to_pylist()]
    large = pa.types.is_large_string(d.type)
    offs = np.frombuffer(d.buffers()[1], dtype="i8" if large else "i4")[d.offset: d.offset + len(d) + 1]
    raw = d.buffers()[2].to_pybytes() if len(d) else b""
    return [raw[offs[i]: offs[i + 1]].decode() for i in range(len(d))]


# (table file, its columns read, then column, value, column, value, ...) -> the rows passing those tests
_ROWS: dict[tuple, np.ndarray] = {}


def _select_codes(system: str, family: str, framework: str, filename: str, cols: tuple[str, ...],
                  out: tuple[str, ...], **eq: object) -> tuple[dict[str, np.ndarray], dict] | None:
    """The `out` columns of the rows where every column in `eq` equals its value (string columns as
    codes), and the string columns' values, from the newest table version that has such rows.

    A newer aiconfigurator release may ship a partial table (TensorRT-LLM 1.3.0rc23's MoE table holds
    a few new shapes only): a shape it lacks is read from the newest older version that measured it."""
    first = None
    for version in range(len(_table_paths(system, family, framework, filename))):
        t, words = _table(system, family, framework, filename, cols, version)
        rows = None  # the matching rows so far (None: all): each test runs on the survivors of the last
        prefix: tuple = (_table_paths(system, family, framework, filename)[version], cols)
        for col, v in eq.items():
            if col in words:
                hit = np.flatnonzero(words[col] == v)
                v = int(hit[0]) if len(hit) else -1  # noqa: PLW2901 - the value's code
            prefix = (*prefix, col, v)
            got_rows = _ROWS.get(prefix)
            if got_rows is None:  # queries share their first tests (one model's shape): each runs once
                a = t[col] if rows is None else t[col][rows]
                keep = np.flatnonzero(a == v)
                got_rows = _ROWS[prefix] = keep if rows is None else rows[keep]
            rows = got_rows
        got = {c: (t[c] if rows is None else t[c][rows]) for c in out}, words
        if len(t[cols[0]] if rows is None else rows):
            return got
        first = first or got
    return first


def _select(system: str, family: str, framework: str, filename: str, cols: tuple[str, ...],
            out: tuple[str, ...], **eq: object) -> dict[str, np.ndarray] | None:
    """The `out` columns (numpy) of the rows where every column in `eq` equals its value."""
    got = _select_codes(system, family, framework, filename, cols, out, **eq)
    if got is None:
        return None
    d, words = got
    return {c: words[c][a] if c in words else a for c, a in d.items()}


def _columns(system: str, family: str, framework: str, filename: str, cols: tuple[str, ...]) -> dict | None:
    """All `cols` of one table as numpy arrays (tests and tools; lookups use _select)."""
    return _select(system, family, framework, filename, cols, cols)


# Extracts of the tables (curves, distinct values) persist in lpxsim's step cache, one book per GPU and
# framework (gpu/book.py): a warm process opens no parquet file, a cold one writes one file per book.
BOOK_VERSION = "v3"


def _persisted(system: str, framework: str, name: str, parts: tuple, compute):
    """A small JSON-able extract of the tables, kept in this GPU's and framework's book (the key
    carries the aiconfigurator-core version and the hash of lpxsim.gpu's source: an extract is a function of
    the selection code too, and a cache shared by two versions of it served one's extracts to the other)."""
    from lpxsim.core.cache import digest, source_version
    from lpxsim.gpu.book import book

    b = _BOOK_KEYS.get((system, framework))
    if b is None:
        b = _BOOK_KEYS[(system, framework)] = digest("gpu-measured-book", f"aic-{aic_version()}-{BOOK_VERSION}",
                                                     source_version("lpxsim.gpu"), system, framework)
    return book(b).get_or_compute(repr((name, parts)), compute)


_BOOK_KEYS: dict[tuple[str, str], str] = {}


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


def _distinct(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a 1-d array (np.unique without its masked-array check, whose first
    call imports numpy.ma: ~30 ms of a cold start)."""
    s = np.sort(a)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _curve(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique (x, median y) of one measured curve, made non-decreasing in x.

    More work never takes less time: a smaller problem can always run the larger one's kernel
    padded, so a measured point above a later one is timing noise (e.g. a GEMM at m = 1 slower
    than at m = 8); each point is capped by the smallest time measured at any larger x.
    """
    order = np.lexsort((y, x))  # by x, and by y within one x: each group's median is its middle
    x, y = x[order], y[order]
    start = np.flatnonzero(np.concatenate(([True], x[1:] != x[:-1])))
    size = np.diff(np.append(start, len(x)))
    # np.median of a group: its middle value, or the mean of its two middle values
    uy = (y[start + (size - 1) // 2] + y[start + size // 2]) / 2
    uy = np.minimum.accumulate(uy[::-1])[::-1]
    return x[start].astype(float), uy.astype(float)


def _first(options: tuple[str, ...], present: np.ndarray) -> str | None:
    have = set(present.tolist())
    return next((o for o in options if o in have), None)


MS = 1e-3  # the tables hold milliseconds


def _py(v: object) -> object:
    """A numpy scalar as the Python value (JSON-able); other values unchanged."""
    return v.item() if hasattr(v, "item") else v


class MeasuredOps:
    """Op-time lookups in one GPU's tables for one framework (seconds; None where not measured)."""

    def __init__(self, aic_system: str, framework: str) -> None:
        self.system, self.framework = aic_system, framework
        # extracts already read from the book, as the callers use them (read-only): a validation run asks
        # for the same few curves tens of thousands of times, and rebuilding them each time was most of a lookup
        self._memo: dict[tuple, object] = {}

    def _curve_of(self, name: str, family: str, filename: str, cols: tuple[str, ...], x: str,
                  **eq: object) -> tuple[np.ndarray, np.ndarray] | None:
        """The measured curve latency(x) of the rows matching `eq` (persisted), or None."""
        key = ("curve", name, family, filename, cols, x, tuple(sorted(eq.items())))
        if key in self._memo:
            return self._memo[key]  # type: ignore[return-value]

        def compute() -> list | None:
            d = _select(self.system, family, self.framework, filename, cols, (x, "latency"), **eq)
            if d is None or not len(d[x]):
                return [None]
            xs, ys = _curve(d[x], d["latency"])
            return [xs.tolist(), ys.tolist()]

        got = _persisted(self.system, self.framework, name, (x, sorted(eq.items())), compute)
        out = None
        if got[0] is not None:
            out = np.asarray(got[0], dtype=float), np.asarray(got[1], dtype=float)
            for a in out:
                a.setflags(write=False)
        self._memo[key] = out
        return out

    def _values(self, name: str, family: str, filename: str, cols: tuple[str, ...], want: tuple[str, ...],
                **eq: object) -> list | None:
        """Distinct value tuples of `want` over the rows matching `eq` (persisted), or None (read-only)."""
        key = ("values", name, family, filename, cols, want, tuple(sorted(eq.items())))
        if key in self._memo:
            return self._memo[key]  # type: ignore[return-value]

        def compute() -> list:
            got = _select_codes(self.system, family, self.framework, filename, cols, want, **eq)
            if got is None:
                return [None]
            d, words = got
            if not len(d[want[0]]):
                return [[]]
            # distinct rows without a Python tuple per table row (100k rows in a GEMM table): each row
            # as one integer (its columns' ranks among their distinct values), then distinct integers
            uniq = [_distinct(d[w]) for w in want]
            packed = np.zeros(len(d[want[0]]), dtype=np.int64)
            for w, u in zip(want, uniq, strict=True):
                packed = packed * len(u) + np.searchsorted(u, d[w])
            rows = _distinct(packed)
            ranks = []
            for u in reversed(uniq):
                ranks.append(rows % len(u))
                rows = rows // len(u)
            ranks.reverse()
            vals = [words[w][u] if w in words else u for w, u in zip(want, uniq, strict=True)]
            out = [tuple(_py(vals[j][i]) for j, i in enumerate(r)) for r in zip(*ranks, strict=True)]
            return [sorted(out)]

        got = _persisted(self.system, self.framework, name, (want, sorted(eq.items())), compute)
        out = None if got[0] is None else [tuple(r) for r in got[0]]
        self._memo[key] = out
        return out

    @cache  # noqa: B019 - a few instances per process, each lives as long as the process
    def _gemm_pairs(self, dtype: str) -> np.ndarray:
        """The (N, K) shapes measured for `dtype` GEMMs, one row each (read-only)."""
        cols = ("gemm_dtype", "m", "n", "k", "latency")
        pairs = np.array(self._values("gemm-pairs", "gemm", "gemm_perf.parquet", cols, ("n", "k"), gemm_dtype=dtype),
                         dtype=float)
        pairs.setflags(write=False)
        return pairs

    @cache  # noqa: B019 - a few instances per process, each lives as long as the process
    def gemm(self, m: int, n: int, k: int, weights: str) -> float | None:
        """An (m x k) @ (k x n) GEMM with `weights`-format weights."""
        cols = ("gemm_dtype", "m", "n", "k", "latency")
        dtypes = self._values("gemm-dtypes", "gemm", "gemm_perf.parquet", cols, ("gemm_dtype",))
        if not dtypes:
            return None
        dt = _first(GEMM_DTYPE.get(weights, ()), np.array([d[0] for d in dtypes]))
        if dt is None:
            return None
        pairs = self._gemm_pairs(dt)
        d = np.abs(np.log(pairs[:, 0] / n)) + np.abs(np.log(pairs[:, 1] / k))
        n0, k0 = (int(v) for v in pairs[int(np.argmin(d))])
        c = self._curve_of("gemm", "gemm", "gemm_perf.parquet", cols, "m", gemm_dtype=dt, n=n0, k=k0)
        if c is None:
            return None
        t = _interp(c[0], c[1], m)
        if dt == "nvfp4":
            t = min(t, self._fp4_compute_ceiling(m, n0, k0, float(c[1][0])))
        t = t * (n * k) / (float(n0) * float(k0)) * MS
        tuned = UNTUNED_GEMM.get((self.framework, dt))
        other = measured_ops(self.system, tuned).gemm(m, n, k, weights) if tuned is not None else None
        # the autotuner's candidates include the fallback tactic the table timed: the tuned kernel is no slower
        # than it, nor than the same GPU's other engine's kernel for the shape (most of the same FP4 libraries)
        return t if other is None else min(t, other)

    def _fp4_compute_ceiling(self, m: int, n: int, k: int, weight_stream_ms: float) -> float:
        """The longest an NVFP4 GEMM (m x k) @ (k x n) may take where it is compute-bound (ms): the FP8 GEMM
        of the same shape on this GPU, at the same fraction of its tensor-core peak, on the FP4 peak
        (FP4 MMA issues twice FP8's work per clock on Blackwell; cuBLAS 12.9 reports block-scaled FP4 matmuls
        up to 2.3x its FP8 ones, docs/sources.md "CUBLAS-129"), and never under the table's own weight-
        streaming time at its smallest m (`weight_stream_ms`: below the ridge the FP4 kernel is memory-bound
        and the table already prices it).

        aiconfigurator-core 0.12's NVFP4 GEMM table plateaus at 4.2 PFLOP/s on B200 (47 % of the 9 PF dense
        peak) while its FP8 table of the same shapes reaches 3.1 of 4.5 PF (69 %): FP4 at 1.35x FP8 where the
        hardware issues 2x. A saturated engine runs its GEMMs at M in the thousands, where that plateau
        decides the step (issue 28 item 5; assumption "gpu-fp4-gemm-ceiling")."""
        ratio = _fp8_over_fp4_peak(self.system)
        t8 = self.gemm(m, n, k, "fp8")
        if ratio is None or t8 is None:
            return math.inf
        return max(t8 / MS * ratio, weight_stream_ms)

    @cache  # noqa: B019
    def moe(self, tokens: int, hidden: int, inter: int, topk: int, experts: int, moe_tp: int, moe_ep: int,
            weights: str, backend: str | None = None) -> float | None:
        """Grouped routed-expert FFN for `tokens` tokens entering the MoE layer, run by the engine's MoE
        `backend` ("trtllm", "cutlass", "deepgemm", "triton"; see MOE_BACKEND_OF).

        `backend` is what the engine was launched with (gpu/moe_backend.py); where no table times that
        backend for this shape, or none is named, the fastest backend timed for it (an engine tuned for the
        workload picks its fastest kernel). `moe_backends` lists what the tables hold."""
        times = self.moe_backends(tokens, hidden, inter, topk, experts, moe_tp, moe_ep, weights)
        if not times:
            return None
        return times[backend] if backend in times else min(times.values())

    @cache  # noqa: B019
    def moe_backends(self, tokens: int, hidden: int, inter: int, topk: int, experts: int, moe_tp: int,
                     moe_ep: int, weights: str) -> dict[str, float]:
        """{MoE backend: seconds} for one shape on this GPU under this engine (empty: not measured).

        This engine's table first. A backend it lacks for a shape it did measure comes from (1) another
        engine's table of the same GPU when both engines launch the same kernel library (SHARED_MOE_BACKENDS:
        TensorRT-LLM's TRTLLM backend and SGLang's flashinfer_trtllm runner both run the trtllm-gen MoE
        kernels; aiconfigurator-core 0.12 timed them for FP8 block-scaled experts under SGLang only), then
        (2) the same engine's table of the same-generation sibling, scaled by the HBM bandwidth ratio (decode
        MoE streams expert weights): aiconfigurator-core 0.12 timed only CUTLASS for NVFP4 on B300 under
        TensorRT-LLM, both on B200.

        A finer expert split is never slower than a coarser one that divides it (`_coarser_ep_cap`)."""
        shape = (tokens, hidden, inter, topk, experts, moe_tp, moe_ep, weights)
        own = _by_backend(self._moe_by_source(*shape))
        if not own:
            return {}
        for fw in FRAMEWORKS:
            if fw != self.framework:
                theirs = _by_backend(measured_ops(self.system, fw)._moe_by_source(*shape))
                own |= {b: t for b, t in theirs.items() if b in SHARED_MOE_BACKENDS and b not in own}
        sib = KERNEL_SIBLING.get(self.system)
        if sib is not None:
            scale = _hbm_Bps(sib) / _hbm_Bps(self.system)
            theirs = _by_backend(measured_ops(sib, self.framework)._moe_by_source(*shape))
            own |= {b: t * scale for b, t in theirs.items() if b not in own}
        return self._coarser_ep_cap(own, shape)

    def _coarser_ep_cap(self, times: dict[str, float], shape: tuple) -> dict[str, float]:
        """`times` of one MoE shape, each backend's capped by its time at every coarser expert split that divides
        this one (same tokens, same expert TP; assumption "gpu-moe-ep-subset").

        The tables time the busiest rank (AIC-MOE-DIST). Experts are split into contiguous groups, so a rank of
        EP e holds the experts of ep / e ranks of EP ep, and the busiest of the finer ranks has a subset of the
        coarser one's work on the same kernel: it cannot take longer. aiconfigurator-core 0.12 times NVFP4 at
        EP8 and one or two tokens at 36-38 us on B200 and B300, against 20-25 us at EP4 and 19-21 us at TP8,
        while its EP8 times from four tokens up sit below EP4's, as the split predicts."""
        tokens, hidden, inter, topk, experts, moe_tp, moe_ep, weights = shape
        out = dict(times)
        for e in range(1, moe_ep):
            if moe_ep % e == 0:
                coarse = self.moe_backends(tokens, hidden, inter, topk, experts, moe_tp, e, weights)
                out = {b: min(t, coarse.get(b, t)) for b, t in out.items()}
        return out

    @cache  # noqa: B019
    def _moe_by_source(self, tokens: int, hidden: int, inter: int, topk: int, experts: int, moe_tp: int,
                       moe_ep: int, weights: str) -> dict[str, float]:
        """{kernel source: seconds} of this table's MoE backends for one shape (empty: not measured)."""
        cols = ("moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
                "moe_ep_size", "distribution", "kernel_source", "latency")
        shape = {"hidden_size": hidden, "inter_size": inter, "topk": topk, "num_experts": experts,
                 "moe_tp_size": moe_tp, "moe_ep_size": moe_ep}
        have = self._values("moe-kinds", "moe", "moe_perf.parquet", cols, ("moe_dtype", "distribution", "kernel_source"),
                            **shape)
        if not have:
            return {}
        dt = _first(MOE_DTYPE.get(weights, ()), np.array([h[0] for h in have]))
        dist = _first(MOE_DISTRIBUTION, np.array([h[1] for h in have if h[0] == dt])) if dt else None
        if dt is None or dist is None:
            return {}
        times = {}
        for src in sorted({h[2] for h in have if h[0] == dt and h[1] == dist}):
            c = self._curve_of("moe", "moe", "moe_perf.parquet", cols, "num_tokens", moe_dtype=dt, distribution=dist,
                               kernel_source=src, **shape)
            if c is not None:
                times[src] = _interp(c[0], c[1], tokens) * MS
        return times

    @cache  # noqa: B019
    def mla(self, phase: str, batch: int, context: int, heads: int, kv: str) -> float | None:
        """MLA attention core on one GPU: `heads` local heads; decode: batch x one token over `context`
        cached tokens; prefill: batch x `context` new tokens from empty.

        A prefill is priced in the form the engines run a fresh prompt in: attention over the heads projected
        to 192 / 128 dims (the MHA form). A context table whose kernel source timed the weight-absorbed form
        instead (`ABSORBED_CONTEXT_SOURCES`: 576 / 512 dims over the latent, ~3.4x the FLOPs) is not read;
        the same GPU's table that timed the MHA form is (`MHA_CONTEXT_FROM`)."""
        fname = "generation_mla_perf.parquet" if phase == "decode" else "context_mla_perf.parquet"
        axis = "step" if phase == "decode" else "isl"
        cols = ("kv_cache_dtype", "num_heads", "batch_size", axis, "latency")
        if phase != "decode" and self.framework in MHA_CONTEXT_FROM and self._mla_context_absorbed():
            return measured_ops(self.system, MHA_CONTEXT_FROM[self.framework]).mla(phase, batch, context, heads, kv)
        return self._grid2("mla", fname, cols, axis, batch, context,
                           kv_cache_dtype=KV_DTYPE.get(kv, "bfloat16"), num_heads=heads)

    def mla_verify(self, batch: int, context: int, heads: int, q_len: int, kv: str) -> float | None:
        """MLA attention of a verify step on one GPU: `batch` sequences, each `q_len` query positions over
        `context` cached tokens. The decode kernels fold a sequence's query positions into the head
        dimension (FLASHMLA-SQ: `seq_len_q * num_heads_q` query rows per KV head; FlashInfer's and
        TensorRT-LLM's MLA kernels tile the same rows), so the KV cache is streamed once per sequence: the
        decode table at `heads x q_len` heads, interpolated (log-log) between the head counts it measured.
        Beyond its largest head count the rows are split over extra passes, each streaming the KV again."""
        have = self._values("mla-heads", "mla", "generation_mla_perf.parquet",
                            ("kv_cache_dtype", "num_heads", "batch_size", "step", "latency"), ("num_heads",),
                            kv_cache_dtype=KV_DTYPE.get(kv, "bfloat16"))
        if not have:
            return None
        measured = sorted({int(h[0]) for h in have})
        want = heads * q_len
        passes = max(1, math.ceil(want / measured[-1]))
        rows = want / passes
        lo = max((h for h in measured if h <= rows), default=measured[0])
        hi = min((h for h in measured if h >= rows), default=measured[-1])
        t_lo = self.mla("decode", batch * passes, context, lo, kv)
        if t_lo is None or hi == lo:
            return t_lo
        t_hi = self.mla("decode", batch * passes, context, hi, kv)
        if t_hi is None:
            return None
        w = (math.log(rows) - math.log(lo)) / (math.log(hi) - math.log(lo))
        return float(math.exp((1 - w) * math.log(t_lo) + w * math.log(t_hi)))

    def _mla_context_absorbed(self) -> bool:
        """Whether this GPU's context-MLA table timed the weight-absorbed form (its kernel source says)."""
        srcs = self._values("mla-context-sources", "mla", "context_mla_perf.parquet", ("kernel_source",),
                            ("kernel_source",))
        return bool(srcs) and all(s[0] in ABSORBED_CONTEXT_SOURCES for s in srcs)

    @cache  # noqa: B019
    def attention(self, phase: str, batch: int, context: int, heads: int, kv_heads: int, head_dim: int,
                  kv: str) -> float | None:
        """GQA/MHA attention core (full attention) on one GPU with `heads`/`kv_heads` local heads."""
        fname = "generation_attention_perf.parquet" if phase == "decode" else "context_attention_perf.parquet"
        axis = "step" if phase == "decode" else "isl"
        cols = ("kv_cache_dtype", "num_heads", "num_key_value_heads", "head_dim", "window_size", "batch_size",
                axis, "latency")
        return self._grid2("attention", fname, cols, axis, batch, context, kv_cache_dtype=KV_DTYPE.get(kv, "bfloat16"),
                           num_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim, window_size=0)

    @cache  # noqa: B019
    def mla_bmm(self, which: str, tokens: int, heads: int, weights: str) -> float | None:
        """MLA's per-head absorb BMM ("pre": q_absorb, "post": v_absorb)."""
        dt = "fp8" if weights in ("fp8", "fp8_block", "fp4", "mxfp4") else "bfloat16"
        cols = ("op_name", "bmm_dtype", "num_tokens", "num_heads", "latency")
        c = self._curve_of("bmm", "mla_bmm", "mla_bmm_perf.parquet", cols, "num_tokens", op_name=f"mla_gen_{which}",
                           bmm_dtype=dt, num_heads=heads)
        return None if c is None else _interp(c[0], c[1], tokens) * MS

    @cache  # noqa: B019
    def all_reduce(self, elements: int, gpus: int, graphs: bool) -> float | None:
        """One all-reduce of `elements` BF16 values over `gpus` GPUs (the framework's custom all-reduce).

        The table's `message_size` counts elements, as aiconfigurator-core's `query_custom_allreduce(size)`
        does (its speed-of-light formula takes 2 bytes per element; docs/sources.md "AIC-AR-UNITS"): a
        lookup by bytes read a message twice as large (up to 2x the time where bandwidth-bound)."""
        cols = ("kernel_source", "num_gpus", "message_size", "latency")
        srcs = self._values("ar-kinds", "comm", "custom_allreduce_perf.parquet", cols, ("kernel_source",), num_gpus=gpus)
        if not srcs:
            return None
        want = "graph" if graphs else "eager"
        pick = [s[0] for s in srcs if want in str(s[0]).lower()] or [s[0] for s in srcs]
        # Several kernels measured for one engine (TensorRT-LLM on GB300: MNNVL one-shot up to 32 KB,
        # two-shot from 128 KB) are the strategies it picks between by message size: the fastest one
        # at this size (one kernel's curve stretched past its own range loses to the one measured there).
        times = []
        for src in pick:
            c = self._curve_of("ar", "comm", "custom_allreduce_perf.parquet", cols, "message_size", num_gpus=gpus,
                               kernel_source=src)
            if c is not None:
                times.append(_interp(c[0], c[1], elements) * MS)
        return min(times) if times else None

    @cache  # noqa: B019
    def nccl(self, op: str, nbytes: float, gpus: int, element_bytes: int = 2) -> float | None:
        """One NCCL collective (`op`: all_gather, reduce_scatter, alltoall, all_reduce) of an `nbytes` buffer (the
        gathered output of an all-gather, the input of a reduce-scatter) over `gpus` GPUs, from the tables'
        nccl-tests sweep (comm/nccl, any engine's). The table's `message_size` counts elements of its dtype
        (the half curve runs twice the int8 curve's time at large sizes, as twice the bytes): `element_bytes`
        picks the half (2) or int8 (1) curve. None where the GPU count or the op was not measured."""
        dtype = "int8" if element_bytes == 1 else "half"
        cols = ("op_name", "nccl_dtype", "num_gpus", "message_size", "latency")

        def compute() -> list:
            d = _select(self.system, "comm", "nccl", "nccl_perf.parquet", cols, ("message_size", "latency"),
                        op_name=op, nccl_dtype=dtype, num_gpus=gpus)
            if d is None or not len(d["message_size"]):
                return [None]
            xs, ys = _curve(d["message_size"], d["latency"])
            return [xs.tolist(), ys.tolist()]

        got = _persisted(self.system, "nccl", "nccl", (op, dtype, gpus), compute)
        if got[0] is None:
            return None
        xs, ys = np.asarray(got[0], dtype=float), np.asarray(got[1], dtype=float)
        return _interp(xs, ys, max(1.0, nbytes / (1 if element_bytes == 1 else 2))) * MS

    def _decode_beyond(self, name: str, fname: str, cols: tuple[str, ...], batches: np.ndarray, b: float,
                       c: tuple[np.ndarray, np.ndarray], s: float, **eq: object) -> float:
        """A decode-attention time (ms) at `b` sequences x `s` cached tokens beyond this batch's last measured
        context: the last point plus the extra KV streamed at the fastest rate (sequence-tokens per ms) the
        table measured for this shape at any batch.

        aiconfigurator stops each batch's sweep at about the same batch x context (2^17-2^18 tokens for GQA
        on B200), so at large batch the last point is short (1,024 x 127) and still flat, launch- and
        per-sequence-bound; scaling it linearly in context (the 1-d rule) prices a 1,024 x 432 step at 3.4x
        that flat time, KV streamed at a third of what the same kernel reaches at 8 x 32k (issue 28 item 5)."""
        best = 0.0
        for bb in batches:
            cc = self._curve_of(name, name, fname, cols, "step", batch_size=int(bb), **eq)
            if cc is not None:
                best = max(best, float(np.max(bb * cc[0] / cc[1])))
        x1, y1 = float(c[0][-1]), float(c[1][-1])
        if best <= 0.0:
            return y1 * s / x1
        return y1 + b * (s - x1) / best

    def _grid2(self, name: str, fname: str, cols: tuple[str, ...], axis: str, b: float, s: float,
               **eq: object) -> float | None:
        """Interpolate a (batch, length) table: along length per measured batch, then across batch (log-log)."""
        have = self._values(f"{name}-batches-{fname}", name, fname, cols,
                            ("batch_size",), **eq)
        if not have:
            return None
        ub = np.array(sorted(h[0] for h in have), dtype=float)
        lo = ub[ub <= b].max() if (ub <= b).any() else ub.min()
        hi = ub[ub >= b].min() if (ub >= b).any() else ub.max()
        vals = []
        for bb in (lo, hi):
            c = self._curve_of(name, name, fname, cols, axis, batch_size=int(bb), **eq)
            if c is None:
                return None
            if axis == "step" and s > c[0][-1]:
                vals.append(self._decode_beyond(name, fname, cols, ub, bb, c, s, **eq))
            else:
                vals.append(_interp(c[0], c[1], max(1.0, s)))
        if lo == hi:
            return vals[0] * (b / lo if b > hi else 1.0) * MS
        w = (math.log(b) - math.log(lo)) / (math.log(hi) - math.log(lo))
        return float(math.exp((1 - w) * math.log(vals[0]) + w * math.log(vals[1]))) * MS


@cache
def measured_ops(aic_system: str, framework: str) -> MeasuredOps:
    """The (process-wide) lookup object of one GPU and framework."""
    return MeasuredOps(aic_system, framework)
