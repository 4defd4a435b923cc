"""The GPU cost model's efficiency and overhead parameters, and where they come from.

A few physical parameters, shared across GPU generations: fractions of HBM
bandwidth reached by three kinds of memory traffic, per-kernel and per-step
overheads, and the shape dependence of matmul efficiency. The fitted values
live in `catalog/fitted/gpu_fit.json` together with the data they were fitted
on (`benchmarks/fit_gpu.py` writes it). Priors below are the starting point
of the fit and the fallback when no fit file ships; each is reasoned in
docs/assumptions.md ("GPU cost model").
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

FIT_FILE = "gpu_fit.json"


@dataclass(frozen=True)
class GpuParams:
    """Efficiencies in (0, 1] and overheads in seconds."""

    weight_bw_eff: float = 0.75  # HBM fraction streaming dense weights (GEMV/GEMM); hardware.md §9: 0.70-0.85
    expert_bw_eff: float = 0.55  # HBM fraction for routed-expert weights in a grouped GEMM (many small GEMMs)
    kv_bw_eff: float = 0.5  # HBM fraction for paged KV reads in decode attention; hardware.md §9: 0.4-0.6
    kernel_overhead_s: float = 4e-6  # per kernel under CUDA graphs: launch gap, ramp-up, tail
    step_overhead_s: float = 1e-3  # per engine step: scheduler, sampling, host sync
    collective_overhead_s: float = 5e-6  # per collective, on top of the catalog's NCCL alpha (engine sync, launch)
    gemm_m_half: float = 64.0  # rows at which a matmul reaches half its large-shape efficiency (not fitted)
    bw_half_bytes: float = 4e6  # bytes one kernel streams at which it reaches half its bandwidth efficiency
    first_token_overhead_s: float = 0.05  # host time to a request's first token that is not GPU work
    launch_overhead_s: float = 5e-6  # host-side launch per kernel without CUDA graphs (not fitted)
    attention_eff: float = 0.6  # flash-attention fraction of the large-shape matmul rate (not fitted)
    # host time per kernel of an eager forward (Python, the framework's op wrappers, PyTorch dispatch and the
    # launch): a prefill pass runs without CUDA graphs, so it lasts at least its kernels x this
    eager_dispatch_s: float = 20e-6

    def with_values(self, **kw: float) -> GpuParams:
        return replace(self, **kw)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


FITTED_NAMES = (
    "weight_bw_eff", "expert_bw_eff", "kv_bw_eff", "kernel_overhead_s", "step_overhead_s", "collective_overhead_s",
    "bw_half_bytes", "first_token_overhead_s",
)

# Physical ranges the fit may not leave (docs/assumptions.md, "GPU cost model"): bandwidth
# fractions within what GEMV/paged-attention kernels are reported to reach (hardware.md §9),
# overheads from sub-microsecond to tens of microseconds per kernel or collective.
BOUNDS: dict[str, tuple[float, float]] = {
    "weight_bw_eff": (0.7, 0.95),
    "expert_bw_eff": (0.2, 0.95),
    "kv_bw_eff": (0.3, 0.95),
    "kernel_overhead_s": (0.5e-6, 20e-6),
    "step_overhead_s": (0.0, 1e-3),
    "collective_overhead_s": (0.0, 50e-6),
    "gemm_m_half": (8.0, 1024.0),
    "bw_half_bytes": (0.0, 64e6),
    "first_token_overhead_s": (0.0, 0.3),
    "eager_dispatch_s": (0.0, 60e-6),
}


def fit_path() -> Path:
    """Path of the shipped fit file (may not exist before the first fit)."""
    return Path(str(resources.files("lpxsim.catalog").joinpath("fitted", FIT_FILE)))


@cache
def load_fit(path: str | None = None) -> dict[str, Any]:
    """The fit file as a dict ({} if absent)."""
    p = Path(path) if path else fit_path()
    if not p.is_file():
        return {}
    return json.loads(p.read_text())


def fitted_params(path: str | None = None) -> GpuParams:
    """The fitted parameters (priors where the fit file lacks a value)."""
    fit = load_fit(path)
    known = {f.name for f in fields(GpuParams)}
    values = {k: float(v) for k, v in fit.get("params", {}).items() if k in known}
    return GpuParams(**values)
