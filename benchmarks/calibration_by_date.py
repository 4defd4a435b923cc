"""Signed TPOT error of the calibration replay by engine, precision and software month.

    .venv/bin/python benchmarks/calibration_by_date.py

Every non-speculative calibration row priced as `lpxsim validate` prices it (`engine.validation.priced_row`),
grouped by GPU, engine, precision and the month of its run: the median signed error says whether the runs of
one software month come out faster or slower than the fitted model predicts. The evidence for fitting each
configuration at its latest date (docs/assumptions.md "fit-latest-date").
"""

from __future__ import annotations

import statistics

from lpxsim.engine.validation import calibration_rows, priced_row


def main() -> int:
    cache: dict = {}
    groups: dict[tuple[str, str, str, str], list[float]] = {}
    for r in calibration_rows():
        if (r.get("spec_method") or "none") != "none":
            continue
        p, _ = priced_row(r, cache=cache)
        if p is None:
            continue
        key = (r["hardware"], r["framework"], r["precision"], r["date"][:7])
        groups.setdefault(key, []).append(p["tpot_s"] / float(r["tpot_median_s"]) - 1.0)
    print("| GPU | engine | precision | month | rows | TPOT signed (median) |")
    print("|---|---|---|---|---|---|")
    for (hw, fw, prec, month), errs in sorted(groups.items()):
        print(f"| {hw} | {fw} | {prec} | {month} | {len(errs)} | {statistics.median(errs) * 100:+.1f} % |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
