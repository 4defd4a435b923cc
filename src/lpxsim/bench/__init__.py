"""Benchmarks: Artificial Analysis methodology, context x concurrency sweeps, published comparisons."""

from lpxsim.bench.aa import AAPoint, AASetup, run_aa, run_aa_on_step
from lpxsim.bench.sweep import grid, run_sweep
from lpxsim.bench.tokens import TokenConversion, count_o200k

__all__ = ["AAPoint", "AASetup", "TokenConversion", "count_o200k", "grid", "run_aa", "run_aa_on_step", "run_sweep"]
