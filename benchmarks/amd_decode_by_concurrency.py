"""Predicted DeepSeek-R1 FP8 TP8 SGLang TPOT and TTFT on the AMD GPUs by concurrency (issue 28 item 2).

    .venv/bin/python benchmarks/amd_decode_by_concurrency.py

Each point is priced as the calibration replay prices an InferenceX row (`engine.validation.replay_row`: drawn
lengths, the engine's KV format, the closed-loop steady state), at 1k/1k and 8k/1k and 4 / 16 / 64 users.
"""

from __future__ import annotations

from lpxsim.engine.validation import replay_row

GPUS = ("MI300X", "MI325X", "MI355X")
USERS = (4, 16, 64)


def main() -> int:
    print("| GPU | ISL | " + " | ".join(f"{c} users: TPOT ms / TTFT ms" for c in USERS) + " |")
    print("|---|---|" + "---|" * len(USERS))
    cache: dict = {}
    for hw in GPUS:
        for isl in (1024, 8192):
            cells = []
            for c in USERS:
                row = {"hardware": hw, "framework": "sglang", "precision": "fp8", "tp": "8", "ep": "1",
                       "dp_attention": "false", "isl": str(isl), "osl": "1024", "conc": str(c), "spec_method": "none"}
                p = replay_row(row, cache=cache)
                cells.append(f"{p['tpot_s'] * 1e3:.1f} / {p['ttft_s'] * 1e3:.0f}")
            print(f"| {hw} | {isl:,} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
