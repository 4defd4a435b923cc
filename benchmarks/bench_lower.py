"""CPU time to lower one decode step of a model into its op graph, by batch size (`lpxsim.graph.lower`).

A GPU layout search and `lpxsim validate` lower a step once per batch size they price (the graph does not
depend on the layout), so lowering a large batch must not cost per sequence per layer. Each size is lowered
`--runs` times in this process; the median CPU time (`time.process_time`) is printed with the op count.

Run: python benchmarks/bench_lower.py [--model deepseek-r1] [--runs 5] [--sizes 1,64,512,2048]
"""

from __future__ import annotations

import argparse
import statistics
import time

from lpxsim.catalog import get_model
from lpxsim.graph.lower import lower
from lpxsim.graph.ops import Phase


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="deepseek-r1")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="1,64,512,2048", help="comma-separated batch sizes (sequences)")
    args = ap.parse_args()
    model = get_model(args.model)
    print(f"{args.model}: decode step, contexts at 0 (the layout-independent lowering a search reuses)")
    print("| sequences | ops | median CPU ms (runs) |")
    print("|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        times, ops = [], 0
        for _ in range(args.runs):
            t = time.process_time()
            graph = lower(model, Phase("decode", (0,) * n, 1), "fp8", "bf16", "separate")
            times.append(time.process_time() - t)
            ops = len(graph.ops)
        print(f"| {n:,} | {ops:,} | {1e3 * statistics.median(times):.1f} ({args.runs}) |")


if __name__ == "__main__":
    main()
