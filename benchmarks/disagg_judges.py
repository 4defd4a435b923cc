"""Disaggregated DeepSeek-R1 serving: InferenceX's published points replayed on their two pools (judges, not fitted).

    .venv/bin/python benchmarks/disagg_judges.py [--json]

The 80 points of `data/measured/inferencex_disagg_judges.csv` (prefill and decode workers at their own layouts,
the KV handed from one to the other) go through `lpxsim validate --rows` (`engine.validation.replay_user_rows`):
each priced row is the serving simulator's run of InferenceX's client on its two pools. Prints the tables that
command prints and its CPU time (user + sys of this process). Results: docs/validation.md, "Disaggregated rows".
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from importlib import resources


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the replay as one JSON object")
    args = ap.parse_args()
    from lpxsim.cli.validate_cmd import rows_markdown
    from lpxsim.engine.validation import replay_user_rows

    path = str(resources.files("lpxsim").joinpath("data", "measured", "inferencex_disagg_judges.csv"))
    w0 = time.perf_counter()
    res = replay_user_rows(path)
    wall = time.perf_counter() - w0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps(res, indent=1, default=str) if args.json else rows_markdown("inferencex_disagg_judges.csv", res))
    print(f"\n{wall:.1f} s wall, {ru.ru_utime + ru.ru_stime:.1f} s CPU (user {ru.ru_utime:.1f} + sys {ru.ru_stime:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
