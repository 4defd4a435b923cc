"""Which queueing answer fits the measured GPU rows: the random-arrival steady state, the stagger, or the simulator.

On every calibration configuration (GPU, engine, precision, layout, ISL/OSL, concurrency > 1) where the arrival
pattern decides the answer (`engine.answer.arrival_sensitive`, the engine's own test), each solver
prices the replay's own step model and is scored against the configuration's measured median TTFT and TPOT
(median over its dated runs):

- ``random``: the random-arrival steady state (the replay's, and the engine's answer on a GPU);
- ``stagger``: the stagger steady state;
- ``simulator``: the serving simulator on one replica as the engine runs it (`engine.simulated.simulate_answer`:
  a closed loop of identical requests, first and last rounds left out, mean TTFT);
- ``simulator, drawn lengths``: the simulator running InferenceX's client (`serving.workload.benchmark_loop`:
  lengths drawn in [0.8, 1] x nominal, 10 requests a user, medians over all of them, as the benchmark reports).

docs/validation.md, "GPU queueing: the engine answers as the replay"; `lpxsim validate` prints the table.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from lpxsim.core.errors import UserError
from lpxsim.engine.bands import error_stats

SOLVERS = ("random", "stagger", "simulator", "simulator, drawn lengths")
MECHANISMS = ("poll", "hold", "neither")  # the GPU engine's admission (SGLang's poll, TensorRT-LLM's ADP hold)
_KEY = ("hardware", "framework", "precision", "tp", "ep", "dp_attention", "isl", "osl", "conc")


def _configurations(rows: list[dict]) -> dict[tuple, list[dict]]:
    by: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if int(r["conc"]) > 1:
            by[tuple(r[k] for k in _KEY)].append(r)
    return by


def _drawn(r: dict, step) -> tuple[float, float]:
    """(median TTFT, median TPOT) of the simulator running the row's benchmark loop with drawn lengths."""
    from lpxsim.engine.validation import row_run

    run = row_run(r, step)
    return run.ttft_median_s, run.tpot_median_s


def queueing_solvers(rows: list[dict]) -> dict:
    """Per-configuration TTFT of each solver on the arrival-sensitive configurations of `rows`, each solver's
    TTFT and TPOT error statistics, and the drawn-length simulator's TTFT by admission mechanism."""
    from lpxsim.catalog import get_model
    from lpxsim.engine.answer import arrival_sensitive
    from lpxsim.engine.deployment import Placed
    from lpxsim.engine.query import Deployment, Load, Workload
    from lpxsim.engine.simulated import simulate_answer
    from lpxsim.engine.steady_state import steady_state
    from lpxsim.engine.validation import LENGTH_RATIO, SYSTEMS, step_model

    model = get_model("deepseek-r1")
    cache: dict = {}
    errs = {s: {"ttft": [], "tpot": []} for s in SOLVERS}
    by_mechanism: dict[str, list[float]] = defaultdict(list)
    configs = []
    for key, runs in sorted(_configurations(rows).items()):
        r = runs[0]
        # measured over every dated run of the configuration, so priced at the engine's fit over its releases
        step = step_model(dict(r, date=""), False, cache)
        isl, osl, users = round(LENGTH_RATIO * int(r["isl"])), round(LENGTH_RATIO * int(r["osl"])), int(r["conc"])
        try:
            ran, stag = steady_state(step, isl, osl, users), steady_state(step, isl, osl, users, arrivals="stagger")
        except UserError:
            continue  # the KV does not hold the load (the replay skips these rows too)
        if not arrival_sensitive(step, isl, users, stag, ran):
            continue  # the pattern does not decide: every solver agrees
        dep = Deployment(SYSTEMS[r["hardware"]], int(r["tp"]), given=True, framework=step.framework)
        sim = simulate_answer(Placed(dep, step, model, users), Workload(isl, osl), Load(concurrency=users))
        found = {"random": (ran.ttft_s, ran.tpot_s), "stagger": (stag.ttft_s, stag.tpot_s),
                 "simulator": (sim.ttft_s, sim.tpot_s), "simulator, drawn lengths": _drawn(r, step)}
        ttft = statistics.median(float(x["ttft_median_s"]) for x in runs)
        tpot = statistics.median(float(x["tpot_median_s"]) for x in runs)
        for name, (t, p) in found.items():
            errs[name]["ttft"].append(100 * (t / ttft - 1))
            errs[name]["tpot"].append(100 * (p / tpot - 1))
        mechanism = "poll" if step.admission_poll else "hold" if step.admission_hold else "neither"
        by_mechanism[mechanism].append(100 * (found["simulator, drawn lengths"][0] / ttft - 1))
        configs.append({"configuration": " ".join(key), "measured_ttft_s": ttft, "mechanism": mechanism,
                        **{f"{name} ttft_s": t for name, (t, _) in found.items()}})
    return {"configurations": configs,
            "solvers": {name: {m: error_stats(v).as_row() for m, v in d.items()} for name, d in errs.items()},
            "drawn_by_mechanism": {m: error_stats(by_mechanism[m]).as_row() for m in MECHANISMS if by_mechanism[m]}}
