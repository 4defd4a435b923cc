"""AMD's own measured kernel times for the ops its tuning tables cover on Instinct GPUs (issue 28).

aiter (ROCm/aiter), the kernel library SGLang's ROCm builds run DeepSeek on (`SGLANG_USE_AITER=1`,
IX-AMD-SGL), ships the tables its tuner wrote on the hardware: for every (CU count, M, N, K) of the
FP8 block-scale (1x128 activations, 128x128 weights) GEMMs it serves, the fastest kernel and its time
in microseconds (AITER-TUNED in docs/sources.md). CU count identifies the silicon the tuner ran on:
304 is gfx942 (MI300X and MI325X), 256 gfx950 (MI355X). Where a GEMM of the step has a row, its time
is this measurement, not an NVIDIA sibling's time projected by rates (projection.py): those tables
show what a rate ratio cannot, a floor of ~17-20 us for every K = 7168 GEMM at decode sizes (the
kernels loop over K without splitting it), where H200's measured kernels take 10-12 us.

Lookup (`fp8_block_gemm_s`): rows of the same (N, K), linear in M between measured M, the smallest
measured M's time below it (decode-sized GEMMs sit on the floor; the rows are flat from M = 1 to 64),
and beyond the largest the largest's time plus the added rows' roofline time at the GPU's achieved
rates. An (N, K) with no row (a fused q_a + kv_a projection of a newer engine), or whose rows stop
below this M, takes the nearest N of the same K measured up to this M plus the roofline time of the
difference: the floor is shared, the extra columns stream at the achieved bandwidth. A shape whose K
has no row at all is left to the projection (assumptions `aiter-own-tables`, `aiter-between-rows`).

Fused MoE (`fp8_block_moe_s`): aiter's tuned fused-MoE times per tokens entering the layer for
DeepSeek's routed experts at a tensor-parallel split (local intermediate 256 = TP8, 512 = TP4). The
tables hold 257 experts with top-9: the engine runs the shared expert as a 257th expert every token
picks (shared-experts fusion), so that time covers the shared expert too and the caller drops its
separate GEMMs. Only MI355X (256 CUs) has such rows in the tables read; MI300X/MI325X keep the projection.

Per-tensor FP8 GEMMs (`fp8_tensor_gemm_s`): AMD's MLPerf Inference v5.1 Llama-2-70B submission ships the
hipBLASLt tuning file its vLLM loads (`HIPBLASLT_TUNING_OVERRIDE_FILE`), written by hipblaslt-bench on gfx942:
for each of the four dense GEMM shapes at a tensor-parallel size of 1 (QKV 10,240 x 8,192, output 8,192 x
8,192, gate-up 57,344 x 8,192, down 8,192 x 28,672) and token counts up to the submission's batches, the chosen
kernel and its measured time (HIPBLASLT-MLPERF; HIPBLASLT-TUNE for the format). Runs of token counts share one
measurement, taken at the run's largest count; those are the rows kept. Llama-3 and -3.1 70B have the same
shapes. Lookup as for aiter's GEMMs, measured shapes only (`hipblaslt-own-table`).

Both tables' times are floored at the GEMM's FLOPs over the GPU's sustained matmul rate, AMD's max-achievable
FLOP/s (AMD-MAF; `amd-sustained-clock`): the tuners ran short bursts, a serving step runs under the board's power
limit, and MI300X (750 W) sustains a 19 % lower clock than MI325X (1,000 W) on the same die.
"""

from __future__ import annotations

import csv
import hashlib
import math
from bisect import bisect_left
from functools import cache
from importlib import resources

from lpxsim.specs.hardware import SystemSpec

GEMM_FILE = "aiter_fp8_blockscale_gemm.csv"
MOE_FILE = "aiter_fp8_blockscale_fmoe.csv"
TENSOR_GEMM_FILE = "hipblaslt_fp8_gemm.csv"
TABLES = (GEMM_FILE, MOE_FILE, TENSOR_GEMM_FILE)


def _path(name: str):  # noqa: ANN202 - an importlib Traversable
    return resources.files("lpxsim").joinpath("data", "measured", name)


@cache
def tables_digest() -> str:
    """A short digest of the packaged AMD tables (part of the priced-step cache key)."""
    h = hashlib.sha256()
    for name in TABLES:
        h.update(_path(name).read_bytes())
    return h.hexdigest()[:12]


Curve = tuple[tuple[int, ...], tuple[float, ...]]  # (measured sizes ascending, seconds)


@cache
def _curves(name: str, shape: tuple[str, ...], size: str) -> dict[tuple[int, ...], Curve]:
    """One packaged table as curves: shape columns -> (`size` values ascending, seconds), the fastest time
    where two tables (or two commits of one) give a point (aiter's tuner keeps the faster kernel)."""
    best: dict[tuple[int, ...], float] = {}
    with _path(name).open(newline="") as fh:
        for r in csv.DictReader(fh):
            key = (*(int(r[c]) for c in shape), int(r[size]))
            best[key] = min(float(r["us"]) * 1e-6, best.get(key, math.inf))
    grouped: dict[tuple[int, ...], list[tuple[int, float]]] = {}
    for (*key, x), sec in best.items():
        grouped.setdefault(tuple(key), []).append((x, sec))
    return {key: (tuple(x for x, _ in sorted(v)), tuple(y for _, y in sorted(v))) for key, v in grouped.items()}


def _gemm_curves(name: str = GEMM_FILE) -> dict[tuple[int, ...], Curve]:
    """(cu_num, n, k) -> curve over M of one GEMM table."""
    return _curves(name, ("cu_num", "n", "k"), "m")


def _moe_curves() -> dict[tuple[int, ...], Curve]:
    """(cu_num, hidden, local intermediate, experts, top-k) -> curve over tokens."""
    return _curves(MOE_FILE, ("cu_num", "model_dim", "inter_dim", "expert", "topk"), "token")


@cache
def _silicon() -> frozenset[int]:
    """The CU counts the tables hold rows for."""
    return frozenset(key[0] for key in (*_gemm_curves(), *_gemm_curves(TENSOR_GEMM_FILE), *_moe_curves()))


def _between(xs: tuple[int, ...], ys: tuple[float, ...], x: int) -> float:
    """Linear between the measured points around `x` (xs[0] < x < xs[-1])."""
    i = bisect_left(xs, x)
    if xs[i] == x:
        return ys[i]
    w = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
    return ys[i - 1] + w * (ys[i] - ys[i - 1])


def compute_units(system: SystemSpec) -> int | None:
    """The GPU's compute-unit count (catalog `chip.extra.compute_units`), None where not catalogued."""
    v = system.chip.extra.get("compute_units")
    return int(float(v)) if v is not None else None


def has_tables(system: SystemSpec) -> bool:
    """Whether AMD's tables (aiter's or hipBLASLt's) hold rows measured on this GPU's silicon (its CU count)."""
    return compute_units(system) in _silicon()


def _at(system: SystemSpec, n: int, k: int, ms: tuple[int, ...], ss: tuple[float, ...], m: int) -> float:
    if m <= ms[0]:
        return ss[0]
    if m >= ms[-1]:  # the rows beyond the largest measured M: its time plus the added work's roofline
        return ss[-1] + max(0.0, _roofline_s(system, m, n, k) - _roofline_s(system, ms[-1], n, k))
    return _between(ms, ss, m)


def _roofline_s(system: SystemSpec, m: int, n: int, k: int) -> float:
    from lpxsim.gpu.projection import achieved_roofline_s

    # FP8 weights and activations, BF16 output
    return achieved_roofline_s(system, 2.0 * m * n * k, float(n * k + m * k + 2 * m * n), "fp8")


def fp8_block_gemm_s(system: SystemSpec, m: int, n: int, k: int) -> float | None:
    """Seconds of an FP8 block-scale GEMM (M x K activations, N x K weights) on `system` from aiter's
    tables, or None when they hold no row of this K for its silicon."""
    return _table_gemm_s(GEMM_FILE, system, m, n, k)


def fp8_tensor_gemm_s(system: SystemSpec, m: int, n: int, k: int) -> float | None:
    """Seconds of a per-tensor-scaled FP8 GEMM (M x K activations, N x K weights, FP16 out) on `system` from the
    hipBLASLt tuning table AMD's MLPerf Llama-2-70B submission ran with, or None when it holds no row of this
    (N, K) for its silicon. Only measured shapes: the table's smallest times are bandwidth-bound (a 10,240 x 8,192
    weight streams at ~3.9 TB/s at M <= 16), not a kernel floor another shape would share, so a tensor-parallel
    slice of these layers is left to the projection (assumption `hipblaslt-own-table`)."""
    return _table_gemm_s(TENSOR_GEMM_FILE, system, m, n, k, exact_only=True)


def _table_gemm_s(name: str, system: SystemSpec, m: int, n: int, k: int, exact_only: bool = False) -> float | None:
    """A table's time, never faster than the GPU's sustained matmul rate: the tuners time kernels in short runs
    at whatever clock those reach, where a dense GEMM under the board's power limit runs at AMD's max-achievable
    rate (AMD-MAF: MI300X 1,273 TFLOP/s FP8 at 1,230 MHz; assumption `amd-sustained-clock`)."""
    t = _table_lookup_s(name, system, m, n, k, exact_only)
    if t is None:
        return None
    from lpxsim.gpu.projection import achieved_matmul_flops

    return max(t, 2.0 * m * n * k / achieved_matmul_flops(system, "fp8"))


def _table_lookup_s(name: str, system: SystemSpec, m: int, n: int, k: int, exact_only: bool) -> float | None:
    cu = compute_units(system)
    if cu is None:
        return None
    curves = _gemm_curves(name)
    exact = curves.get((cu, n, k))
    if exact is not None and (m <= exact[0][-1] or exact_only):
        return _at(system, n, k, *exact, m)
    if exact_only:
        return None
    same_k = [nn for (c, nn, kk) in curves if c == cu and kk == k]
    if not same_k:
        return None
    # prefer other shapes measured up to this M: a curve that stops at small M extrapolates by the roofline
    covering = [nn for nn in same_k if nn != n and curves[(cu, nn, k)][0][-1] >= m]
    if not covering:
        if exact is not None:
            return _at(system, n, k, *exact, m)
        covering = same_k
    near = min(covering, key=lambda nn: abs(math.log(nn / n)))
    base = _at(system, near, k, *curves[(cu, near, k)], m)
    floor = min(_at(system, nn, k, *curves[(cu, nn, k)], m) for nn in covering)
    return max(floor, base + _roofline_s(system, m, n, k) - _roofline_s(system, m, near, k))


def fp8_block_moe_s(system: SystemSpec, tokens: int, hidden: int, inter: int, topk: int,
                    experts: int) -> tuple[float, bool] | None:
    """(seconds, whether that time includes one shared expert) of a tensor-parallel FP8 block-scale fused
    MoE layer on `system` from aiter's tables (`inter`: the GPU's share of each expert's intermediate), or
    None without rows for this shape. Rows of `experts` + 1 with top-(k + 1) are the shared expert fused in."""
    cu = compute_units(system)
    if cu is None:
        return None
    curves = _moe_curves()
    for shared, key in ((False, (cu, hidden, inter, experts, topk)),
                        (True, (cu, hidden, inter, experts + 1, topk + 1))):
        got = curves.get(key)
        if got is None:
            continue
        ts, ss = got
        if tokens <= ts[0]:
            return ss[0], shared
        if tokens >= ts[-1]:  # beyond the measured tokens the grouped GEMMs are compute-bound: linear
            return ss[-1] * tokens / ts[-1], shared
        return _between(ts, ss, tokens), shared
    return None
