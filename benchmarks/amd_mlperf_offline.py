"""AMD's MLPerf v5.1 Llama-2-70B Offline runs against lpxsim, and what AMD's hipBLASLt table changes.

    python benchmarks/amd_mlperf_offline.py

Prints (1) the four Llama-2-70B GEMMs on MI300X as the hipBLASLt tuning file of AMD's submission measured them,
as priced (floored at AMD's max-achievable rate) and as projected from H200's measured vLLM kernels by achieved
rates (what priced them before), and (2) the
two AMD points of `lpxsim validate`'s MLPerf table with the table and without it, and at the conditions the
points leave to assumptions (KV format, decode batch). docs/validation.md "AMD's MLPerf Offline runs".
"""

from __future__ import annotations

from lpxsim.catalog import get_system
from lpxsim.core import cache
from lpxsim.engine.validation import _offline_stated, mlperf_points, point_lengths
from lpxsim.gpu import amd_kernels, compose
from lpxsim.gpu.amd_kernels import fp8_tensor_gemm_s
from lpxsim.gpu.measured import measured_ops
from lpxsim.gpu.projection import projected_op_s

SHAPES = (("QKV", 10240, 8192), ("output", 8192, 8192), ("gate-up", 57344, 8192), ("down", 8192, 28672))
TOKENS = (16, 256, 1536, 2560)


def kernels() -> None:
    mi, h200 = get_system("mi300x"), get_system("h200-hgx")
    ops = measured_ops("h200_sxm", "vllm")
    print("| GEMM (N x K) | tokens | hipBLASLt row (us) | priced: the row, floored at MI300X's max-achievable rate (us) "
          "| projected from H200 (us) | priced / projected |")
    print("|---|---|---|---|---|---|")
    for name, n, k in SHAPES:
        for m in TOKENS:
            row = amd_kernels._table_lookup_s(amd_kernels.TENSOR_GEMM_FILE, mi, m, n, k, exact_only=True)
            own = fp8_tensor_gemm_s(mi, m, n, k)
            flops, nbytes = 2.0 * m * n * k, float(n * k + m * k + 2 * m * n)
            proj = projected_op_s(mi, h200, ops.gemm(m, n, k, "fp8"), flops, nbytes, "fp8")
            print(f"| {name} {n:,} x {k:,} | {m:,} | {row * 1e6:,.1f} | {own * 1e6:,.1f} | {proj * 1e6:,.1f} "
                  f"| {own / proj:.2f} |")


def points() -> None:
    amd = [p for p in mlperf_points() if p["system"].startswith("mi")]
    cases = {"as stated (hipBLASLt table)": {}, "KV BF16": {"kv": "bf16"}, "decode batch 1,280": {"max_batch_per_rank": "1280"}}
    print("| point | published | case | predicted | error |")
    print("|---|---|---|---|---|")
    for p in amd:
        pub = float(p["tok_s_per_gpu"])
        rows = []
        for label, change in cases.items():
            if label == "decode batch 1,280" and p["system"] != "mi300x":
                continue
            q = dict(p, **change)
            rows.append((label, _offline_stated(q, point_lengths(q))[1]))
        real, digest = compose.fp8_tensor_gemm_s, amd_kernels.tables_digest
        # every GEMM projected from H200, as before; a new source label keeps the priced steps apart
        compose.fp8_tensor_gemm_s, amd_kernels.tables_digest = (lambda *a: None), (lambda: "without-hipblaslt")
        try:
            rows.insert(0, ("projected GEMMs (before)", _offline_stated(p, point_lengths(p))[1]))
        finally:
            compose.fp8_tensor_gemm_s, amd_kernels.tables_digest = real, digest
        for label, pred in rows:
            print(f"| {p['id']} | {pub:,.0f} | {label} | {pred:,.0f} | {(pred / pub - 1) * 100:+.1f} % |")


def main() -> None:
    cache.set_enabled(False)  # nothing from the disk cache: both cases priced here
    kernels()
    print()
    points()


if __name__ == "__main__":
    main()
