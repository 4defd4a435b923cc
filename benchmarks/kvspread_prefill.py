"""Prefill on a KV-spread layout against the unspread layouts on the same chips (issue 26 item 6).

Gemma 4 31B, FP8 weights, BF16 KV, 128 LPUs (half a rack): the time to prefill one 10K-token prompt
(`LpxStepModel.prefill(PrefillChunk(10000, 0))`: 256-row sub-chunks streamed through the pipeline) and one
256-row sub-chunk at a 4,096-token context compiled alone (its latency and stage interval, and the C2C
waits on its critical path). Figures and their reading: docs/validation.md, "Physics guards".

Usage: python benchmarks/kvspread_prefill.py [--isl N]
"""

from __future__ import annotations

import argparse
import json

from lpxsim.graph import Phase
from lpxsim.lpu.compiler import compile_program
from lpxsim.lpu.stepmodel import LpxStepModel
from lpxsim.step.protocol import PrefillChunk

MODEL, CHIPS = "gemma-4-31b", 128
LAYOUTS = ("tp=8,stages=16,kvsplit=2,kvspread=15", "tp=8,stages=16,kvsplit=2,kvspread=0",
           "tp=16,stages=8,kvsplit=4,kvspread=7", "tp=16,stages=8,kvsplit=4,kvspread=0")


def row(layout: str, isl: int) -> dict:
    step = LpxStepModel(MODEL, "lpx", chips=CHIPS, layout=layout, context=isl + 256)
    r = compile_program(MODEL, "lpx", chips=CHIPS, layout=layout, phase=Phase.prefill(256, 4096), context=isl + 256)
    t = r.timing
    return {"layout": layout, "prefill_ms": round(step.prefill(PrefillChunk(isl, 0)).latency_s * 1e3, 2),
            "sub_chunk_latency_ms": round(t.latency_s * 1e3, 3), "sub_chunk_interval_ms": round(t.interval_s * 1e3, 3),
            "sub_chunk_c2c_wait_ms": round(t.breakdown_us.get("c2c_wait", 0.0) / 1e3, 3), "verified": r.report.ok}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--isl", type=int, default=10_000)
    args = ap.parse_args()
    for lay in LAYOUTS:
        print(json.dumps(row(lay, args.isl)), flush=True)


if __name__ == "__main__":
    main()
