"""Replay every GPU calibration row through the code users run and report the error per group.

    python benchmarks/validate_gpu.py                 # every row of the calibration CSV
    python benchmarks/validate_gpu.py --limit 40      # a quick look (first 40 rows)
    python benchmarks/validate_gpu.py --projection    # also the projected path and the projection pairs

The replay itself is `lpxsim.engine.validation` (what `lpxsim validate` runs): each row goes through
`make_step_model` + `steady_state`, exactly what `lpxsim estimate --system ... --tp --ep [--dp-attention]
--weights --kv --framework --isl --osl --concurrency` runs, at the benchmark's mean drawn lengths (0.9 x
nominal), the throughput scaled to the benchmark's finite run of 10 x C requests (`run_throughput_factor`).
Prints the median absolute % error and the MAPE of TPOT, output tok/s per GPU and TTFT per group, and the
median signed error (+ = predicted high).

--projection replays the rows again with each GPU priced from a measured sibling's tables (H200 <- H100,
B200 <- B300), and prices DeepSeek-R1 steps on a measured GPU from its own tables and from its sibling's
(B200 -> B300, H100 -> H200, GB200 -> GB300).
"""

from __future__ import annotations

import argparse
import sys

from lpxsim.engine.validation import calibration_rows, gpu_replay, projection_pairs, run_throughput_factor

__all__ = ["run_throughput_factor", "main"]


def _print(title: str, res: dict) -> None:
    print(f"\n{title}\n{'group':<26} {'rows':>5}   TPOT md/MAPE/signed    out tok/s/GPU          TTFT")
    for g, d in res["groups"].items():
        cells = []
        for k in ("tpot", "tok_s_per_chip", "ttft"):
            s = d.get(k)
            cells.append(f"{s['median_abs_pct']:5.1f} {s['mape_pct']:5.1f} {s['median_signed_pct']:+6.1f}" if s
                         else f"{'-':>18}")
        print(f"{g:<26} {d['tpot']['n']:>5}   " + "   ".join(cells))
    if res["skipped_kv_does_not_fit"]:
        print(f"skipped (KV of all streams does not fit): {res['skipped_kv_does_not_fit']}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", help="calibration CSV (default: the packaged copy)")
    ap.add_argument("--limit", type=int, help="only the first N rows")
    ap.add_argument("--projection", action="store_true", help="also validate the projected path")
    args = ap.parse_args(argv)
    rows = calibration_rows(args.csv)
    rows = rows[: args.limit] if args.limit else rows
    _print("measured kernels (median |error| %, MAPE %, median signed %)", gpu_replay(rows))
    if args.projection:
        _print("projected from a sibling (H200 <- H100, B200 <- B300)", gpu_replay(rows, project=True))
        print("\nprojection rule, step level (DeepSeek-R1 fp8 TP8 SGLang: decode B 1-128 x ctx 1k/8k, prefill 1k/8k)")
        for p in projection_pairs():
            print(f"  {p['from']:>12} -> {p['to']:<12} median |err| {p['median_abs_pct']:5.1f} %  "
                  f"MAPE {p['mape_pct']:5.1f} %  signed {p['median_signed_pct']:+5.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
