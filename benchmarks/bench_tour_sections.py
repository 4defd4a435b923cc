"""CPU seconds per tour section, in one process (`--jobs 1`), with the step cache it finds.

    LPXSIM_CACHE=EMPTY_DIR /usr/bin/time -f "%U %S %e" python benchmarks/bench_tour_sections.py OUT

Prints one line per section on stderr ("SECTION name status cpu S": this process's user + sys while the
section ran) and the total; stdout carries the tour's summary. Run it again on the same cache for the warm
figures. The figures are in docs/benchmarks.md ("Tour: the agent-session sections").
"""

from __future__ import annotations

import sys
import time

import lpxsim.report.tour as tour
from lpxsim.report.tour_sections import TourConfig


def main(out: str) -> None:
    real = tour.section

    def timed(name, cfg, out_dir, pool=None):
        t0 = time.process_time()
        res = real(name, cfg, out_dir, pool)
        print(f"SECTION {name} {res.status} cpu {time.process_time() - t0:.1f}", file=sys.stderr, flush=True)
        return res

    tour.section = timed
    t0 = time.process_time()
    res = tour.run_tour(TourConfig(), out, log=lambda s: print(s, file=sys.stderr, flush=True))
    print(f"TOTAL cpu {time.process_time() - t0:.1f} {res.statuses}", file=sys.stderr)
    for line in res.summary:
        print(line)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "lpxsim-report")
