"""Predicted DeepSeek-R1 TPOT and output tok/s per GPU by concurrency, B200 beside B300 (issue 28 item 1).

    .venv/bin/python benchmarks/decode_by_concurrency.py

TP8/EP8, 1k/1k as InferenceX runs it (drawn lengths 0.9 x nominal, the engine's KV format), SGLang and
TensorRT-LLM, FP4 and FP8: the closed-loop steady state the calibration replay uses (gpu.calibration.PointModel).
"""

from __future__ import annotations

from lpxsim.gpu.calibration import FRAMEWORK, PointModel, kv_format
from lpxsim.gpu.step import GpuStepModel

CONCURRENCY = (1, 4, 16, 64, 128)
GPUS = (("B200", "b200-hgx"), ("B300", "b300-hgx"))


def main() -> int:
    print("| engine, precision | GPU | " + " | ".join(f"conc {c}" for c in CONCURRENCY) + " |")
    print("|---|---|" + "---|" * len(CONCURRENCY))
    for fw in ("sglang", "trt"):
        for prec in ("fp4", "fp8"):
            for hw, system in GPUS:
                cells = []
                for c in CONCURRENCY:
                    sm = GpuStepModel("deepseek-r1", system, tp=8, ep=8, weights=prec, kv=kv_format(hw, fw),
                                      framework=FRAMEWORK[fw])
                    p = PointModel({"isl": 1024, "osl": 1024, "conc": c}, sm).predict()
                    cells.append(f"{p['tpot_s'] * 1e3:.2f} ms / {p['output_tok_s_per_gpu']:.0f}")
                print(f"| {FRAMEWORK[fw]} {prec} | {hw} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
