"""TensorRT-LLM's performance overview at two CUDA-graph capture lists: what the padding of a decode batch moves.

    python benchmarks/trtllm_overview_graphs.py

`lpxsim validate` prices every run of TensorRT-LLM's performance overview (TRT-PERF-OVERVIEW) at the capture sizes
the page states (1, 2, 4, ..., 128, 256, 384, 512, 1024, 2048, 4096, 8192, with padding): a decode batch runs the
next captured graph up. The same runs with the engine's default capture sizes (1, 2, 4, multiples of 8 to 128, of 128
to 1,024, eager beyond) show how much of each model's error the padding decides. The published figures are judges;
nothing here is fitted to them. docs/validation.md "TensorRT-LLM's performance overview".
"""

from __future__ import annotations

import time

from lpxsim.engine.trtllm_bench import overview, overview_points


def main() -> None:
    stated = overview_points()
    default = [dict(p, graph_batches="") for p in stated]
    results = {}
    for name, points in (("stated capture sizes", stated), ("engine's default capture sizes", default)):
        t0 = time.process_time()
        results[name] = (overview(points), time.process_time() - t0)
    models = list(results["stated capture sizes"][0]["by_model"])
    print("| capture sizes | " + " | ".join(models) + " | all | CPU s |")
    print("|---" * (len(models) + 3) + "|")
    for name, (res, cpu) in results.items():
        cells = [f"{s['median_abs_pct']:.1f} / {s['median_signed_pct']:+.1f}" for s in res["by_model"].values()]
        s = res["stats"]
        print(f"| {name} | " + " | ".join(cells) + f" | {s['median_abs_pct']:.1f} / {s['median_signed_pct']:+.1f} | "
              f"{cpu:.1f} |")
    print("\ncells: MdAPE / median signed error, percent, over the model's runs")


if __name__ == "__main__":
    main()
