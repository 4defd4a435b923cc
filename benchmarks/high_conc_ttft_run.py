"""Median TTFT at 128+ users: the steady state (the replay's answer) against the benchmark run's median.

The calibration rows at 128 users and more are priced about a fifth fast in TTFT (`lpxsim validate`, "conc>=128").
InferenceX's client starts all C users at once and draws each request's lengths in [0.8, 1] x nominal, so its users
stay partly in phase and their prefills arrive in waves. This prints, for every calibration configuration at 128+
users (one row each, the latest date), the measured median TTFT, the steady state's and the median over the
benchmark's run simulated as the client runs it (`engine.validation.row_run`), with each one's error. A check, not
an answer: the replay and the fit use the steady state.

    python benchmarks/high_conc_ttft_run.py
"""

from __future__ import annotations

import statistics
import time

from lpxsim.engine.validation import calibration_rows, priced_row, row_run, step_model


def main() -> None:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    latest: dict[tuple, dict] = {}
    for r in calibration_rows():
        if int(r["conc"]) < 128 or r["spec_method"] not in ("", "none") or r["disagg"] == "true":
            continue
        key = (r["hardware"], r["framework"], r["precision"], r["tp"], r["ep"], r["dp_attention"], r["isl"],
               r["osl"], r["conc"])
        if key not in latest or r["date"] > latest[key]["date"]:
            latest[key] = r
    cache: dict = {}
    errs: dict[str, dict[str, list[float]]] = {}
    print("| GPU | engine | precision | TP/EP | attention DP | ISL / OSL | conc | date | measured ms | steady ms "
          "| error | run median ms | error |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, r in sorted(latest.items()):
        p, why = priced_row(r, cache=cache)
        if p is None:
            print(f"<!-- {key}: {why} -->")
            continue
        run = row_run(r, step_model(r, False, cache))
        m = float(r["ttft_median_s"])
        e_ss, e_run = 100 * (p["ttft_s"] / m - 1), 100 * (run.ttft_median_s / m - 1)
        fw = errs.setdefault(r["framework"], {"steady": [], "run": []})
        fw["steady"].append(e_ss)
        fw["run"].append(e_run)
        print(f"| {r['hardware']} | {r['framework']} | {r['precision']} | TP{r['tp']}/EP{r['ep']} | "
              f"{r['dp_attention']} | {int(r['isl']):,} / {int(r['osl']):,} | {r['conc']} | {r['date']} | {m * 1e3:,.0f} "
              f"| {p['ttft_s'] * 1e3:,.0f} | {e_ss:+.1f} % | {run.ttft_median_s * 1e3:,.0f} | {e_run:+.1f} % |")
    print("\n| engine | configurations | steady state MdAPE / signed | run median MdAPE / signed |\n|---|---|---|---|")
    for fw, e in sorted(errs.items()):
        print(f"| {fw} | {len(e['steady'])} | {statistics.median(abs(x) for x in e['steady']):.1f} / "
              f"{statistics.median(e['steady']):+.1f} % | {statistics.median(abs(x) for x in e['run']):.1f} / "
              f"{statistics.median(e['run']):+.1f} % |")
    print(f"\n{time.process_time() - cpu0:.1f} s CPU, {time.perf_counter() - wall0:.1f} s wall")


if __name__ == "__main__":
    main()
