"""CPU time to lower one decode step of a model into its op graph, by batch size (`lpxsim.graph.lower`).

A GPU layout search and `lpxsim validate` lower a step once per batch size they price (the graph does not
depend on the layout), so lowering a large batch must not cost per sequence per layer. Each size is lowered
`--runs` times in this process; the median CPU time (`time.process_time`) is printed with the op count, beside
the cost plan a GPU step model keeps: from the whole graph (`plan_graph(lower(...))`) and from one lowered layer
of each kind (`plan_step`, what `gpu.step` uses; the two plans are equal, tests/test_gpu_fast.py).

Run: python benchmarks/bench_lower.py [--model deepseek-r1] [--runs 5] [--sizes 1,64,512,2048]
"""

from __future__ import annotations

import argparse
import statistics
import time

from lpxsim.catalog import get_model
from lpxsim.gpu.features import plan_graph, plan_step
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
    print("| sequences | ops | lower: median CPU ms | plan of the whole graph | plan from each kind of layer | runs |")
    print("|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        phase = Phase("decode", (0,) * n, 1)
        times: dict[str, list[float]] = {"lower": [], "whole": [], "kinds": []}
        ops = 0
        for _ in range(args.runs):
            t = time.process_time()
            graph = lower(model, phase, "fp8", "bf16", "separate")
            times["lower"].append(time.process_time() - t)
            ops = len(graph.ops)
            t = time.process_time()
            plan_graph(lower(model, phase, "fp8", "bf16", "separate"))
            times["whole"].append(time.process_time() - t)
            t = time.process_time()
            plan_step(model, phase, "fp8", "bf16", "separate")
            times["kinds"].append(time.process_time() - t)
        med = {k: 1e3 * statistics.median(v) for k, v in times.items()}
        print(f"| {n:,} | {ops:,} | {med['lower']:.1f} | {med['whole']:.1f} | {med['kinds']:.1f} | {args.runs} |")


if __name__ == "__main__":
    main()
