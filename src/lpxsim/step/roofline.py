"""Physics guard: no step may beat the roofline of the chips it runs on.

A step's op graph (`lpxsim.graph.lower`) says how many FLOPs it computes and how many bytes of weights and KV it
must read or write. The deployment's chips together compute at most `chips x peak FLOP/s` and move at most
`chips x memory bandwidth`, so the step's work takes at least

    bound_s = max(FLOPs / (chips x peak_flops), bytes / (chips x bandwidth))

On a pipelined LPX replica several micro-batches are in flight, but in steady state one completes every
interval and the chips can do no more than their peaks in that time: `interval_s >= bound_s`, and always
`latency_s >= interval_s`. A step faster than that is a bug in the backend, never a result.

The peak used is the fastest the chip has for the formats the step computes in (the weights' format and the
16-bit attention), and activations are not counted as bytes (they may stay on chip): the bound is a floor that
a correct model can approach but not pass.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from lpxsim.graph import OpGraph, Phase, lower
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec
from lpxsim.step.protocol import StepCost

TOLERANCE = 1e-6  # relative: float round-off in the backends' sums, never a physical margin


@dataclass(frozen=True)
class StepWork:
    """What one step must do, whatever the hardware: FLOPs and bytes of weights and KV it touches."""

    flops: float
    bytes: float


@dataclass(frozen=True)
class RooflineCheck:
    """A step's cost against its chips' roofline. `ok` False: the step is faster than physics allows."""

    latency_s: float
    interval_s: float
    compute_s: float  # FLOPs at the chips' peak
    memory_s: float  # bytes at the chips' bandwidth

    @property
    def bound_s(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def ok(self) -> bool:
        slack = 1.0 - TOLERANCE
        return self.interval_s >= self.bound_s * slack and self.latency_s >= self.interval_s * slack

    @property
    def flop_utilisation(self) -> float:
        """Share of the chips' peak FLOP/s the step sustains (per interval): above 1 is impossible."""
        return self.compute_s / self.interval_s if self.interval_s > 0 else float("inf")

    @property
    def bandwidth_utilisation(self) -> float:
        return self.memory_s / self.interval_s if self.interval_s > 0 else float("inf")

    def describe(self) -> str:
        verdict = "ok" if self.ok else "FASTER THAN THE ROOFLINE"
        return (f"{verdict}: latency {self.latency_s * 1e3:.4g} ms, interval {self.interval_s * 1e3:.4g} ms, bound "
                f"{self.bound_s * 1e3:.4g} ms (compute {self.compute_s * 1e3:.4g} ms at "
                f"{100 * self.flop_utilisation:.1f} % of peak, memory {self.memory_s * 1e3:.4g} ms at "
                f"{100 * self.bandwidth_utilisation:.1f} % of bandwidth)")


def graph_work(graph: OpGraph) -> StepWork:
    """FLOPs and memory bytes (weights and KV read and written; not activations) of a lowered step."""
    nbytes = sum(op.weight_bytes + op.kv_read_bytes + op.kv_write_bytes for op in graph)
    return StepWork(graph.total("flops"), nbytes)


def step_work(model: ModelSpec, phase: Phase, weights: str = "fp8", kv: str = "bf16",
              kv_layout: str = "separate") -> StepWork:
    """The work of one step of `model` for `phase` (a decode batch, a prefill chunk, a verify)."""
    return graph_work(lower(model, phase, weights=weights, kv=kv, kv_layout=kv_layout))


def peak_rates(system: SystemSpec, chips: int, weights: str = "fp8") -> tuple[float, float]:
    """(peak FLOP/s, memory bytes/s) of `chips` chips of `system`: the faster of the weights' format and bf16
    (the highest rate any of the step's matmuls may run at), and the chips' memory bandwidth."""
    chip = system.chip
    rates = [chip.flops(weights)]
    with contextlib.suppress(KeyError):  # a chip without a 16-bit figure: the weights' format alone
        rates.append(chip.flops("bf16"))
    return chips * max(rates), chips * float(chip.memory_bw_Bps)


def check_step(cost: StepCost, work: StepWork, peak_flops: float, bandwidth_Bps: float) -> RooflineCheck:
    """Whether `cost` respects the roofline of hardware with `peak_flops` and `bandwidth_Bps` for `work`."""
    return RooflineCheck(cost.latency_s, cost.interval_s, work.flops / peak_flops, work.bytes / bandwidth_Bps)
