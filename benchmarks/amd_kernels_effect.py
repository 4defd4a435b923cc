"""What AMD's own kernel tables (aiter) change: DeepSeek-R1 FP8 TP8 SGLang 1k/1k TPOT at 1 / 16 / 64 users.

    python benchmarks/amd_kernels_effect.py

Prints each GPU's steady-state TPOT with the aiter tables (now) and without them (every op projected from
the NVIDIA sibling by achieved rates, as before). docs/validation.md "AMD from AMD's own mechanisms".
"""

from __future__ import annotations

from lpxsim.engine.steady_state import steady_state
from lpxsim.gpu import amd_kernels, compose
from lpxsim.gpu.step import GpuStepModel

USERS = (1, 16, 64)
GPUS = ("h200-hgx", "mi300x", "mi325x", "mi355x")


def tpots(system: str) -> list[float]:
    m = GpuStepModel("deepseek-r1", system, tp=8, weights="fp8", framework="sglang")
    return [steady_state(m, 1024, 1024, u).tpot_s * 1e3 for u in USERS]


def main() -> None:
    now = {g: tpots(g) for g in GPUS}
    has = amd_kernels.has_tables
    # every op projected from the sibling (the step's source label changes too: no cached step is reused)
    compose.has_tables = amd_kernels.has_tables = lambda system: False
    try:
        before = {g: tpots(g) for g in GPUS}
    finally:
        compose.has_tables = amd_kernels.has_tables = has
    print("| GPU | projected only (ms) | with aiter tables (ms) | change |")
    print("|---|---|---|---|")
    for g in GPUS:
        b, n = before[g], now[g]
        ch = " / ".join(f"{(y / x - 1) * 100:+.0f} %" for x, y in zip(b, n, strict=True))
        print(f"| {g} | {' / '.join(f'{x:.2f}' for x in b)} | {' / '.join(f'{x:.2f}' for x in n)} | {ch} |")


if __name__ == "__main__":
    main()
