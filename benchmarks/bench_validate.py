"""Cold CPU time of `lpxsim validate` (issue 28 item 8: at most 60 s CPU), optionally alternating with another tree.

Each run is a fresh process on no step cache (`LPXSIM_NO_CACHE=1`); CPU is the child's user + sys
(`os.wait4`), wall beside it, and its peak RSS. With `--src DIR` (another tree's `src`:
`git worktree add /tmp/base OLD`, then `--src /tmp/base/src`) the two trees run alternately, run by run, and
every pair of outputs is compared byte for byte (a speed change must not move a table). Medians are printed.

Run: python benchmarks/bench_validate.py [--runs N] [--src DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = "import sys; from lpxsim.cli.main import run; sys.argv = ['lpxsim', 'validate']; sys.exit(run())"


def one_run(src: Path) -> dict:
    """CPU, wall, peak RSS and stdout of one cold `lpxsim validate` on the tree at `src` (the child's own
    resource use, from `os.wait4`)."""
    env = {**os.environ, "LPXSIM_NO_CACHE": "1", "PYTHONPATH": str(src)}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-c", RUN], stdout=out, stderr=err, text=True, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            sys.exit(f"validate failed on {src} (exit {p.returncode}):\n{err.read()[-2000:]}")
        return {"cpu": ru.ru_utime + ru.ru_stime, "wall": wall, "rss_mb": ru.ru_maxrss / 1024, "out": out.read()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--src", type=Path, default=None, help="another tree's src, run alternately as the base")
    args = ap.parse_args()
    trees = {"this tree": ROOT / "src"} | ({"base": args.src.resolve()} if args.src else {})
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    for i in range(args.runs):
        for name, src in reversed(trees.items()):  # the base first in each pair
            r = one_run(src)
            runs[name].append(r)
            print(f"run {i + 1} {name}: {r['cpu']:.1f} s CPU, {r['wall']:.1f} s wall", file=sys.stderr, flush=True)
        if args.src and runs["base"][-1]["out"] != runs["this tree"][-1]["out"]:
            print(f"run {i + 1}: the outputs differ", file=sys.stderr)
    for name, rs in runs.items():
        cpu = [r["cpu"] for r in rs]
        print(f"{name}: CPU {', '.join(f'{c:.1f}' for c in cpu)} s (median {statistics.median(cpu):.1f}); wall "
              f"median {statistics.median(r['wall'] for r in rs):.1f} s; peak RSS {max(r['rss_mb'] for r in rs):.0f} MB")
    if args.src:
        ratio = statistics.median(r["cpu"] for r in runs["this tree"]) / statistics.median(r["cpu"] for r in runs["base"])
        same = all(a["out"] == b["out"] for a, b in zip(runs["base"], runs["this tree"], strict=True))
        print(f"ratio of medians {ratio:.2f}x; outputs {'byte-identical' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
