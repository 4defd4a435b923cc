"""Which queueing answer fits the measured GPU rows: random-arrival steady state, stagger, or the simulator.

    python benchmarks/gpu_queueing_solvers.py

`lpxsim validate` prints the summary (`engine.solver_check.queueing_solvers`); this prints every
arrival-sensitive calibration configuration's measured TTFT beside each solver's, then the summary, and the
CPU time. docs/validation.md "GPU queueing: the engine answers as the replay".
"""

from __future__ import annotations

import time

from lpxsim.cli.validate_cmd import queueing_table
from lpxsim.engine.solver_check import SOLVERS, queueing_solvers
from lpxsim.engine.validation import calibration_rows


def main() -> None:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    res = queueing_solvers(calibration_rows())
    print("| configuration | admission | measured TTFT ms | " + " | ".join(SOLVERS) + " |")
    print("|---" * (3 + len(SOLVERS)) + "|")
    for c in res["configurations"]:
        print(f"| {c['configuration']} | {c['mechanism']} | {c['measured_ttft_s'] * 1e3:,.0f} | "
              + " | ".join(f"{c[f'{s} ttft_s'] * 1e3:,.0f}" for s in SOLVERS) + " |")
    print()
    print("\n".join(queueing_table(res)))
    print(f"cpu {time.process_time() - cpu0:.1f} s, wall {time.perf_counter() - wall0:.1f} s")


if __name__ == "__main__":
    main()
