"""T9 as a markdown table from `lpxsim modes ... --json` outputs (docs/validation.md).

    lpxsim modes gemma-4-31b --contexts 10000,32000,100000 --loads light,heavy --json > gemma.json
    lpxsim modes gpt-oss-120b --contexts 10000,32000,100000 --loads light,heavy --json > gptoss.json
    python benchmarks/t9_table.py gemma.json gptoss.json
"""

from __future__ import annotations

import json
import math
import sys


def _f(v, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt.format(v)


def main(paths: list[str]) -> None:
    print("| model | mode | context | users | tok/s/user P50 | P10 | TTFT P90 s | tok/s per MW | P50 vs Rubin | "
          "P50 vs LPX | hardware, power |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        for r in d["rows"]:
            print(f"| {d['model']} | {r['mode']} | {r['context']:,} | {r['users']} | {_f(r['tok_s_user_p50'], '{:,.0f}')} | "
                  f"{_f(r['tok_s_user_p10'], '{:,.0f}')} | {_f(r['ttft_p90_s'], '{:,.2f}')} | "
                  f"{_f(r['tok_s_per_mw'], '{:,.0f}')} | {_f(r['speed_vs_rubin'], '{:.2f}x')} | "
                  f"{_f(r['speed_vs_lpx'], '{:.2f}x')} | {r['hardware']} |")


if __name__ == "__main__":
    main(sys.argv[1:])
