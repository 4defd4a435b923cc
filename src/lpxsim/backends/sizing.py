"""The memory arithmetic a deployment is sized by: units that hold a model, streams that fit its chips.

The same arithmetic as the memory capacity model (`plan.capacity`, which reports it with its breakdown and
its notes; a test holds the two equal), kept here, below the engine and the serving layer, so that the
engine's deployments and a fleet's pools are sized by one rule without importing the planning layer.
"""

from __future__ import annotations

import math

from lpxsim.specs.accounting import kv_bytes_per_sequence, weight_bytes
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec

# The capacity model's reserves (docs/assumptions.md, "Model accounting and KV layout"; plan.capacity).
LPU_BUFFER_FRACTION = 0.01  # SRAM per LPU kept for activations, transfer buffers, schedule state (= the
# compiler's lpu.partition.RESERVE_FRACTION; not imported: a warm answer must not import the compiler)
GPU_MEM_FRACTION = 0.90  # the engines' default gpu-memory-utilization / mem-fraction-static
GPU_ACTIVATION_RESERVE_FRACTION = 0.05  # of HBM, for activations, CUDA graphs, workspace

# The most streams a layout search is asked to hold: a short context on a small model fits millions, and a
# layout searched for millions is neither meaningful nor quick (the LPX compiler schedules every stream, and a
# 1,024-stream decode compile on a whole rack takes minutes). A deployment still admits every stream its KV holds.
MAX_DESIGN_STREAMS_LPX = 64
MAX_DESIGN_STREAMS_GPU = 16384


def reserve_fraction(system: SystemSpec) -> float:
    """Share of each chip's memory kept out of the weights + KV budget."""
    if "memory_reserve_fraction" in system.chip.extra:  # wafer-scale systems state their own
        return float(system.chip.extra["memory_reserve_fraction"])
    if system.is_lpu:
        return LPU_BUFFER_FRACTION
    return (1.0 - GPU_MEM_FRACTION) + GPU_ACTIVATION_RESERVE_FRACTION


def streams_that_fit(model: ModelSpec, system: SystemSpec, context: int, chips: int, weights: str = "fp8",
                     kv: str = "bf16", kv_layout: str = "separate") -> int:
    """Streams of `context` tokens whose KV fits next to the weights and reserves on `chips` chips."""
    mem = float(system.chip.memory_bytes)
    free = chips * mem * (1.0 - reserve_fraction(system)) - weight_bytes(model, weights)
    per = kv_bytes_per_sequence(model, context, kv, kv_layout)
    if free <= 0 or per <= 0:
        return 0
    return max(0, int(math.floor(free / per + 1e-9)))


def units_needed(model: ModelSpec, system: SystemSpec, context: int, weights: str = "fp8", kv: str = "bf16",
                 kv_layout: str = "separate") -> int:
    """Fewest whole units (racks, NVL72 domains, nodes) that hold the weights, the reserves and one stream."""
    usable = system.chips_per_unit * float(system.chip.memory_bytes) * (1.0 - reserve_fraction(system))
    need = weight_bytes(model, weights) + kv_bytes_per_sequence(model, context, kv, kv_layout)
    return max(1, math.ceil(need / usable))


def design_streams(model: ModelSpec, system: SystemSpec, context: int, chips: int, weights: str = "fp8",
                   kv: str = "bf16", kv_layout: str = "separate") -> int:
    """The streams a layout on `chips` chips is searched to hold: the largest power of two of the streams of
    `context` tokens that fit there (at least one; capped, `MAX_DESIGN_STREAMS_*`). A power of two because
    the step models schedule power-of-two micro-batch buckets."""
    fit = streams_that_fit(model, system, context, chips, weights, kv, kv_layout)
    cap = MAX_DESIGN_STREAMS_LPX if system.is_lpu else MAX_DESIGN_STREAMS_GPU
    return 1 << (max(1, min(fit, cap)).bit_length() - 1)
