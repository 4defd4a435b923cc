"""Mean TTFT as a benchmark run measures it: the steady state against the simulated run (start-up burst included).

InferenceX's results give a median and a mean TTFT for some calibration rows. The mean averages in the run's first
C requests, which arrive together at an idle engine; the steady state (the engine's answer) has no term for them.
For every calibration row that states a mean (not fitted: the fit uses medians), this prints the measured mean and
median, the steady state and the simulated run's mean (`engine.validation.mean_run_ttft_s`), and the error of each
prediction against the measured mean.

    python benchmarks/mean_ttft_run.py
"""

from __future__ import annotations

import statistics
import time

from lpxsim.core.benchmark_client import LENGTH_RATIO
from lpxsim.engine.steady_state import steady_state
from lpxsim.engine.validation import calibration_rows, mean_run_ttft_s, step_model


def main() -> None:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    cache: dict = {}
    errs: dict[str, list[float]] = {"steady state": [], "simulated run mean": []}
    print("| GPU | engine | precision | TP | ISL | conc | measured mean ms | measured median ms | steady ms | "
          "run mean ms |\n|---|---|---|---|---|---|---|---|---|---|")
    for r in calibration_rows():
        if not r["ttft_mean_s"] or r["spec_method"] not in ("", "none"):
            continue
        step = step_model(r, False, cache)
        isl, osl = round(LENGTH_RATIO * int(r["isl"])), round(LENGTH_RATIO * int(r["osl"]))
        steady = steady_state(step, isl, osl, int(r["conc"])).ttft_s
        run = mean_run_ttft_s(r, step)
        mean = float(r["ttft_mean_s"])
        errs["steady state"].append(100 * (steady / mean - 1))
        errs["simulated run mean"].append(100 * (run / mean - 1))
        print(f"| {r['hardware']} | {r['framework']} | {r['precision']} | {r['tp']} | {r['isl']} | {r['conc']} | "
              f"{mean * 1e3:.0f} | {float(r['ttft_median_s']) * 1e3:.0f} | {steady * 1e3:.0f} | {run * 1e3:.0f} |")
    print("\n| prediction of the measured mean | rows | MdAPE | MAPE | signed |\n|---|---|---|---|---|")
    for name, e in errs.items():
        print(f"| {name} | {len(e)} | {statistics.median(abs(x) for x in e):.1f} % | "
              f"{statistics.fmean(abs(x) for x in e):.1f} % | {statistics.median(e):+.1f} % |")
    print(f"\nCPU {time.process_time() - cpu0:.1f} s, wall {time.perf_counter() - wall0:.1f} s")


if __name__ == "__main__":
    main()
