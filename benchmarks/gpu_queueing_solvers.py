"""Which queueing answer fits the measured GPU rows: random-arrival steady state, stagger, or the simulator.

    python benchmarks/gpu_queueing_solvers.py

On every calibration configuration (GPU, engine, precision, layout, ISL/OSL, concurrency > 1) where the
arrival pattern decides the answer (the test of `engine.answer._auto`: the stagger and random-arrival steady
states differ by more than SENSITIVE, or other users' prefills take more than SENSITIVE_PREFILL_SHARE of a
cycle), each solver prices the replay's own step model (`engine.validation`) and is scored against the
measured median TTFT and TPOT of the configuration's rows (median over dated runs):

- the random-arrival steady state (the replay's and, since this measurement, the engine's on a GPU);
- the stagger steady state;
- the serving simulator on one replica, exactly as the engine ran it there before (`simulate_answer`: a
  closed loop of identical requests, first and last rounds left out, mean TTFT);
- the serving simulator with InferenceX's drawn lengths (each request's ISL and OSL uniform in 0.8-1.0 of the
  nominal, 10 requests a user, median TTFT and TPOT over all of them, as the benchmark reports).

Prints each configuration and MdAPE / MAPE / median signed error per solver, and the CPU time.
docs/validation.md "GPU queueing: the engine answers as the replay".
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

from lpxsim.core.errors import UserError
from lpxsim.engine.answer import SENSITIVE_PREFILL_SHARE, SENSITIVE_TOK_S_USER, SENSITIVE_TTFT
from lpxsim.engine.bands import error_stats
from lpxsim.engine.deployment import Placed
from lpxsim.engine.query import Deployment, Load, Workload
from lpxsim.engine.simulated import simulate_answer
from lpxsim.engine.steady_state import prefill_cost, steady_state
from lpxsim.engine.validation import LENGTH_RATIO, PROMPTS_PER_USER, SYSTEMS, _step_model, calibration_rows  # noqa: PLC2701


def _configs() -> dict[tuple, list[dict]]:
    by: dict[tuple, list[dict]] = defaultdict(list)
    for r in calibration_rows():
        if int(r["conc"]) > 1:
            by[tuple(r[k] for k in ("hardware", "framework", "precision", "tp", "ep", "dp_attention", "isl",
                                    "osl", "conc"))].append(r)
    return by


def _drawn(r: dict, step, users: int) -> tuple[float, float]:
    """(median TTFT, median TPOT) of the simulator running the row's closed loop with drawn lengths."""
    from lpxsim.serving import simulate
    from lpxsim.serving.backends import pinned_step_model
    from lpxsim.serving.config import load_fleet
    from lpxsim.serving.workload import benchmark_loop

    pool = {"name": "p", "system": SYSTEMS[r["hardware"]], "backend": "auto", "model": "deepseek-r1",
            "role": "aggregated", "workers": 1, "gpus_per_worker": int(r["tp"])}
    fleet = load_fleet({"name": "replay", "pools": [pool],
                        "scheduler": {"token_budget": 8192, "max_batch": max(256, users)}})
    wl = benchmark_loop(users, int(r["isl"]), int(r["osl"]), PROMPTS_PER_USER)
    with pinned_step_model(fleet.pools[0], step):
        df = simulate(fleet, wl, seed=0).requests
    return float(df["ttft_s"].median()), float(df["tpot_s"].median())


def main() -> None:
    from lpxsim.catalog import get_model

    cpu0, wall0 = time.process_time(), time.perf_counter()
    model = get_model("deepseek-r1")
    cache: dict = {}
    solvers = ("random", "stagger", "simulator", "simulator, drawn lengths")
    errs: dict[str, dict[str, list[float]]] = {s: {"ttft": [], "tpot": []} for s in solvers}
    by_mechanism: dict[str, list[float]] = defaultdict(list)
    print("configuration | measured TTFT ms | " + " | ".join(solvers))
    for key, rows in sorted(_configs().items()):
        r = rows[0]
        step = _step_model(r, False, cache)
        isl, osl, c = round(LENGTH_RATIO * int(r["isl"])), round(LENGTH_RATIO * int(r["osl"])), int(r["conc"])
        try:
            ran, stag = steady_state(step, isl, osl, c), steady_state(step, isl, osl, c, arrivals="stagger")
        except UserError:
            continue  # the KV does not hold the load (the replay skips these rows too)
        others = (c - 1) * prefill_cost(step, isl)[1] / stag.e2e_s
        if (others <= SENSITIVE_PREFILL_SHARE and abs(ran.tok_s_user / stag.tok_s_user - 1) <= SENSITIVE_TOK_S_USER
                and abs(ran.ttft_s / stag.ttft_s - 1) <= SENSITIVE_TTFT):
            continue  # the pattern does not decide: every solver agrees
        dep = Deployment(SYSTEMS[r["hardware"]], int(r["tp"]), given=True, framework=step.framework)
        sim = simulate_answer(Placed(dep, step, model, c), Workload(isl, osl), Load(concurrency=c))
        drawn = _drawn(r, step, c)
        mechanism = "poll" if step.admission_poll else "hold" if step.admission_hold else "neither"
        ttft = statistics.median(float(x["ttft_median_s"]) for x in rows)
        tpot = statistics.median(float(x["tpot_median_s"]) for x in rows)
        for name, (t, p) in {"random": (ran.ttft_s, ran.tpot_s), "stagger": (stag.ttft_s, stag.tpot_s),
                             "simulator": (sim.ttft_s, sim.tpot_s), "simulator, drawn lengths": drawn}.items():
            errs[name]["ttft"].append(100 * (t / ttft - 1))
            errs[name]["tpot"].append(100 * (p / tpot - 1))
        by_mechanism[mechanism].append(100 * (drawn[0] / ttft - 1))
        print(" ".join(key), f"| {ttft * 1e3:.0f} | {ran.ttft_s * 1e3:.0f} | {stag.ttft_s * 1e3:.0f} | "
              f"{sim.ttft_s * 1e3:.0f} | {drawn[0] * 1e3:.0f}", flush=True)
    n = len(errs["random"]["ttft"])
    print(f"\n{n} arrival-sensitive configurations; MdAPE / MAPE / median signed, %")
    print("| solver | TTFT | TPOT |\n|---|---|---|")
    for name, d in errs.items():
        cells = []
        for metric in ("ttft", "tpot"):
            s = error_stats(d[metric]).as_row()
            cells.append(f"{s['median_abs_pct']:.1f} / {s['mape_pct']:.1f} / {s['median_signed_pct']:+.1f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nsimulator with drawn lengths, TTFT by the GPU engine's admission mechanism "
          "(SGLang's poll on Blackwell, TensorRT-LLM's attention-DP hold, neither):")
    for mech, v in sorted(by_mechanism.items()):
        st = error_stats(v).as_row()
        print(f"  {mech}: {st['median_abs_pct']:.1f} / {st['mape_pct']:.1f} / {st['median_signed_pct']:+.1f} ({len(v)})")
    print(f"\ncpu {time.process_time() - cpu0:.1f} s, wall {time.perf_counter() - wall0:.1f} s")


if __name__ == "__main__":
    main()
