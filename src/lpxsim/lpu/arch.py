"""LPU micro-architecture parameters in cycles: what the scheduler prices instructions with.

Values come, in order, from the system's catalog entry (`chip.lpu`, `chip.clock_hz`,
`chip.extra`), from the fitted file `catalog/fitted/lpx_fit.json` (at most two
parameters, fitted to T1 only by `benchmarks/fit_lpx.py`), and otherwise from
the reasoned defaults below (docs/assumptions.md, "LPX compiler and LP30
micro-architecture"). Nothing here is a published throughput figure.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from lpxsim.specs.hardware import SystemSpec

# Reasoned defaults (cycles unless stated). See docs/assumptions.md for the reasoning of each.
DEFAULTS: dict[str, float] = {
    "mxm_macs_per_cycle": 409_600.0,  # TSP v1: 4 planes x 320 x 320 (ISCA20); LP30 assumed to keep it
    "vxm_ops_per_cycle": 5_120.0,  # TSP v1: 16 ALUs x 320 lanes (ISCA20)
    # pipeline depth of each functional unit (first vector in -> first vector out)
    "mxm_latency_cycles": 320.0,  # one pass through a 320-deep MAC array
    "vxm_latency_cycles": 16.0,  # a chain through the 4 x 4 ALU mesh of a lane
    "sxm_latency_cycles": 16.0,  # permute/shift network
    "mem_latency_cycles": 0.0,  # a MEM slice has no unit pipeline beyond its SRAM access
    # mechanisms every instruction pays on the way to its first output vector
    "issue_cycles": 1.0,  # the ICU dispatches one instruction per queue per cycle
    "sync_cycles": 32.0,  # SYNC/NOTIFY between the ICU queues of producer and consumer slices
    "stream_transit_cycles": 48.0,  # operands MEM -> unit and result unit -> MEM, one slice per cycle
    "superlane_stagger_cycles": 20.0,  # an instruction reaches the 20 superlanes one per cycle
    "sram_access_cycles": 8.0,  # SRAM read at the source slice + write at the destination slice
    "stream_vectors_per_cycle": 64.0,  # streams between slices: 32 east + 32 west, one vector each
    "op_overhead_cycles": 0.0,  # residual per-instruction cycles no mechanism explains (fitted: lpx_fit.json)
    "link_setup_cycles": 0.0,  # per-transfer header/flit framing beyond the hop latency
}
FITTED_MECHANISM = "fitted_overhead"
FIT_FILE = "lpx_fit.json"


@dataclass(frozen=True)
class Arch:
    """One chip's timing parameters, in cycles of the global clock."""

    system: str
    clock_hz: float
    sram_bytes: int
    mem_bytes_per_cycle: float  # SRAM bandwidth per chip
    mxm_flops_per_cycle: dict[str, float]  # by compute format
    vxm_ops_per_cycle: float
    vector_bytes: int
    mxm_latency: int
    vxm_latency: int
    sxm_latency: int
    mem_latency: int
    op_overhead: int
    link_setup: int
    power_w: float
    fitted: tuple[str, ...] = ()
    issue: int = 1
    sync: int = 0
    stream_transit: int = 0
    superlane_stagger: int = 0
    sram_access: int = 0
    stream_vectors_per_cycle: float = math.inf

    def latency_parts(self, unit: str) -> tuple[tuple[str, int], ...]:
        """(mechanism, cycles) from an instruction's start to its first output vector on `unit`."""
        depth = {"MXM": self.mxm_latency, "VXM": self.vxm_latency, "SXM": self.sxm_latency,
                 "MEM": self.mem_latency}[unit]
        parts = (("issue", self.issue), ("sync", self.sync), ("stream_transit", self.stream_transit),
                 ("superlane_stagger", self.superlane_stagger), ("pipeline_depth", depth),
                 ("sram_access", self.sram_access), (FITTED_MECHANISM, self.op_overhead))
        return tuple(p for p in parts if p[1])

    @property
    def stream_bytes_per_cycle(self) -> float:
        """Bytes per cycle the functional units can receive: streams x one 320-byte vector each."""
        return self.stream_vectors_per_cycle * self.vector_bytes

    @property
    def feed_bytes_per_cycle(self) -> float:
        """The rate an instruction's operands reach its unit: SRAM bandwidth or the streams, the lower."""
        return min(self.mem_bytes_per_cycle, self.stream_bytes_per_cycle)

    def cycles(self, seconds: float) -> int:
        return int(math.ceil(seconds * self.clock_hz - 1e-9))

    def seconds(self, cycles: float) -> float:
        return cycles / self.clock_hz

    def with_sram(self, sram_bytes: int | None) -> Arch:
        """The same chip with a different SRAM size (tiny test systems for the emulator)."""
        return self if sram_bytes is None else replace(self, sram_bytes=int(sram_bytes))


@cache
def load_fit(path: str | None = None) -> dict[str, Any]:
    """The fitted parameters (and the data point they came from); empty if none were fitted yet."""
    p = Path(path) if path else Path(str(resources.files("lpxsim.catalog").joinpath("fitted", FIT_FILE)))
    if not p.is_file():
        return {}
    return json.loads(p.read_text())


def _param(system: SystemSpec, key: str, fit: dict[str, Any]) -> float:
    lpu = system.chip.lpu
    if key in lpu:
        return float(lpu[key])
    if key in system.chip.extra:
        return float(system.chip.extra[key])
    fitted = fit.get("parameters", {})
    if key in fitted and system.name in fit.get("applies_to", [system.name]):
        return float(fitted[key]["value"])
    return DEFAULTS[key]


def arch_for(system: SystemSpec, fit: dict[str, Any] | None = None) -> Arch:
    """Timing parameters of `system`'s chip (clock derived from MXM size when not given)."""
    fit = load_fit() if fit is None else fit
    chip = system.chip
    macs = _param(system, "mxm_macs_per_cycle", fit)
    peak = {k: float(v) for k, v in chip.peak_flops.items()}
    if chip.clock_hz is not None:
        clock = float(chip.clock_hz)
    else:  # the rate of the widest-supported format over the MXM's MACs per cycle (E)
        fmt = "fp8" if "fp8" in peak else ("int8" if "int8" in peak else next(iter(peak)))
        clock = peak[fmt] / (2.0 * macs)
    flops = {k: v / clock for k, v in peak.items()}
    fitted_keys = tuple(k for k in fit.get("parameters", {}) if system.name in fit.get("applies_to", []))
    return Arch(
        system=system.name,
        clock_hz=clock,
        sram_bytes=int(float(chip.memory_bytes)),
        mem_bytes_per_cycle=float(chip.memory_bw_Bps) / clock,
        mxm_flops_per_cycle=flops,
        vxm_ops_per_cycle=_param(system, "vxm_ops_per_cycle", fit),
        vector_bytes=int(float(chip.vector_bytes)) if chip.vector_bytes is not None else 320,
        mxm_latency=int(_param(system, "mxm_latency_cycles", fit)),
        vxm_latency=int(_param(system, "vxm_latency_cycles", fit)),
        sxm_latency=int(_param(system, "sxm_latency_cycles", fit)),
        mem_latency=int(_param(system, "mem_latency_cycles", fit)),
        op_overhead=int(round(_param(system, "op_overhead_cycles", fit))),
        link_setup=int(round(_param(system, "link_setup_cycles", fit))),
        power_w=float(chip.power_w),
        fitted=fitted_keys,
        issue=int(_param(system, "issue_cycles", fit)),
        sync=int(_param(system, "sync_cycles", fit)),
        stream_transit=int(_param(system, "stream_transit_cycles", fit)),
        superlane_stagger=int(_param(system, "superlane_stagger_cycles", fit)),
        sram_access=int(_param(system, "sram_access_cycles", fit)),
        stream_vectors_per_cycle=_param(system, "stream_vectors_per_cycle", fit),
    )
