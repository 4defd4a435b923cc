"""CPU time of the LPX layout search's SRAM check (`lpu.partition.chip_bytes`) over a grid of layouts.

A compile's layout search asks the worst chip's bytes of ~900 layouts. This times the check alone, in this
process: every layout of a grid (tensor-parallel 8/16/32, 4-16 stages, KV split 1-8, KV spread 0-3) at three
contexts, one memo per context as `choose_layout` keeps one per stream count, `--runs` times; it prints the
fastest run (the least disturbed on a shared machine) and the bytes' sum, which an A/B must leave unchanged.
For an A/B against an older tree: `PYTHONPATH=/tmp/base/src python benchmarks/bench_partition.py`.

Run: python benchmarks/bench_partition.py [--model gemma-4-31b] [--runs 5] [--streams 8]
"""

from __future__ import annotations

import argparse
import time

from lpxsim.catalog import get_model
from lpxsim.lpu import partition
from lpxsim.lpu.layout import Layout

CONTEXTS = (1024, 10_000, 100_000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma-4-31b")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--streams", type=int, default=8)
    args = ap.parse_args()
    m = get_model(args.model)
    lays = [Layout(tp=tp, stages=s, replicas=1, kv_seq_split=p, kv_spread=r) for tp in (8, 16, 32)
            for s in (4, 8, 15, 16) for p in (1, 2, 4, 8) for r in (0, 1, 3) if tp % p == 0 and r < s]
    best, total = float("inf"), 0.0
    for _ in range(args.runs):
        t = time.process_time()
        total = 0.0
        for ctx in CONTEXTS:
            memo: dict = {}
            total += sum(partition.chip_bytes(m, lay, "fp8", "bf16", "separate", ctx, args.streams, memo) for lay in lays)
        best = min(best, time.process_time() - t)
    print(f"{args.model}: {len(lays)} layouts x {len(CONTEXTS)} contexts, {args.streams} streams: fastest of "
          f"{args.runs} runs {1e3 * best:.1f} ms CPU; bytes summed {total:.6e}")


if __name__ == "__main__":
    main()
