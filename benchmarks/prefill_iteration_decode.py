"""A lead, not adopted: the replay's TTFT if a prefill's iteration also carries a decode step of the running batch.

    python benchmarks/prefill_iteration_decode.py

The calibration replay (`engine.validation`) as shipped, and again with the prefill server's service time (the
mean-value wait's, `steady_state.prefill_wait`) one decode period longer: for every engine, and for
TensorRT-LLM alone (whose iterations carry context and generation requests together: TRT-SCHED). No refit: the
first-token host times stay as fitted without it. Prints TTFT MdAPE / signed error by framework, ISL and
concurrency bucket. docs/validation.md, "A lead for the saturated first token".
"""

from __future__ import annotations

import statistics
from collections import defaultdict

import lpxsim.engine.steady_state as ss
from lpxsim.core.errors import UserError
from lpxsim.engine.validation import LENGTH_RATIO, calibration_rows, step_model, ttft_bucket

SHIPPED = ss.prefill_wait


def replay(longer: str) -> dict[tuple, list[float]]:
    """TTFT errors (%) by (framework, ISL, bucket) and overall; `longer`: whose prefill server takes a decode
    period more per prompt ("none", "all", "trt")."""
    errs: dict[tuple, list[float]] = defaultdict(list)
    cache: dict = {}
    try:
        for r in calibration_rows():
            step, c = step_model(r, False, cache), int(r["conc"])
            isl, osl = round(LENGTH_RATIO * int(r["isl"])), round(LENGTH_RATIO * int(r["osl"]))
            if longer == "all" or (longer == "trt" and r["framework"] == "trt"):
                period, _ = ss.decode_period(step, c, isl + osl // 2)
                ss.prefill_wait = lambda occ, think, users, p=period: SHIPPED(occ + p, think, users)
            else:
                ss.prefill_wait = SHIPPED
            try:
                e = ss.steady_state(step, isl, osl, c)
            except UserError:
                continue
            err = 100 * (e.ttft_s / float(r["ttft_median_s"]) - 1)
            errs[(r["framework"], r["isl"], ttft_bucket(c))].append(err)
            errs[("all",)].append(err)
    finally:
        ss.prefill_wait = SHIPPED
    return errs


def main() -> None:
    runs = {name: replay(name) for name in ("none", "all", "trt")}
    print("| group | rows | shipped MdAPE / signed | +decode period, every engine | +decode period, TensorRT-LLM |")
    print("|---|---|---|---|---|")
    for key in sorted(runs["none"], key=str):
        cells = [f"{statistics.median(map(abs, runs[n][key])):.1f} / {statistics.median(runs[n][key]):+.1f}"
                 for n in runs]
        print(f"| {' '.join(key)} | {len(runs['none'][key])} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
