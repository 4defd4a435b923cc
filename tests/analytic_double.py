"""TEST DOUBLE ONLY: a first-order roofline StepModel that lets the serving tests run in milliseconds.

No user answer comes from it (issue 12: one cost model in every answer): lpxsim itself prices every
pool on its system's detailed backend. Tests that check the simulator's mechanics (queues, routing,
preemption, invariants) swap it in with `use_double(monkeypatch)`; the numbers they assert are
properties of the mechanics, never published figures.

It answers the `lpxsim.step.protocol.StepModel` protocol from a ModelSpec and a few
hardware numbers: a step takes max(bytes / memory bandwidth, FLOPs / peak) over
the chips of the replica, each scaled by an efficiency, plus fixed per-step
overheads (collectives on a GPU, C2C hops on an LPX). Bytes are the weights a
step touches (MoE: expected distinct experts) plus the KV it reads; FLOPs are
matmul + attention FLOPs from `specs.accounting`.

GPU replica: latency == interval (one batch at a time).
LPX replica: the layers are pipelined over `stages` chip groups, so a
micro-batch's latency is `stages` stage times plus a C2C hand-off per stage,
while a new micro-batch may enter every stage time (the interval).

It also implements the optional split protocol of `lpxsim.serving.protocols`
(attention part vs FFN part), which attention/FFN disaggregation needs.
Efficiencies and overheads are assumptions, listed in docs/assumptions.md
("Serving simulator").
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from functools import cached_property

import pytest

from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.graph import expected_experts_touched
from lpxsim.specs.accounting import (
    attention_flops_per_token,
    kv_bytes_per_sequence,
    param_counts,
)
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec
from lpxsim.specs.precision import get_precision
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost

# Assumed efficiencies (docs/assumptions.md "Serving simulator"): shared reference hardware.md §9
# gives 0.70-0.85 of spec HBM bandwidth for weight-streaming GEMV and 72-80 % of peak for dense matmul.
GPU_MEM_EFF = 0.80
GPU_FLOP_EFF = 0.70
LPU_MEM_EFF = 0.90  # compiler-scheduled SRAM streams, no caches to miss (assumption)
LPU_FLOP_EFF = 0.80
GPU_ALLREDUCE_S = 5e-6  # one small NVLink all-reduce under CUDA graphs (hardware.md §9: 3-6 us)
GPU_STEP_OVERHEAD_S = 20e-6  # scheduler + sampling + launch per step (assumption)


@dataclass(frozen=True)
class AnalyticHardware:
    """The few per-chip numbers the roofline needs (SI units)."""

    kind: str  # "gpu" or "lpu"
    memory_bytes: float
    memory_bw_Bps: float
    flops: dict[str, float]
    power_w: float  # per chip, all-in share of its rack/node
    hop_latency_s: float = 350e-9  # LPX C2C hop (HC26)
    usable_memory_fraction: float = 0.9  # GPU: leave room for activations/runtime; LPU: buffers
    name: str = "hw"

    def peak(self, compute: str) -> float:
        order = ["fp4", "fp8", "int8", "bf16"]
        if compute in self.flops:
            return self.flops[compute]
        for alt in order[order.index(compute) if compute in order else 0 :]:
            if alt in self.flops:
                return self.flops[alt]
        raise UserError("weights", f"{self.name} has no FLOP rate for {compute}")

    @classmethod
    def from_system(cls, system: SystemSpec) -> AnalyticHardware:
        """Per-chip numbers of a catalog system; power is the unit's power split over its chips."""
        chip = system.chip
        hop = 350e-9
        for role in ("intra_node", "nvlink", "scale_up"):
            link = system.topology.links.get(role)
            if link is not None:
                hop = float(link.latency_s)
                break
        return cls(
            kind=chip.kind,
            memory_bytes=float(chip.memory_bytes),
            memory_bw_Bps=float(chip.memory_bw_Bps),
            flops={k: float(v) for k, v in chip.peak_flops.items()},
            power_w=float(system.power_w) / max(1, system.chips_per_unit),
            hop_latency_s=hop,
            usable_memory_fraction=0.95 if chip.kind == "lpu" else 0.9,
            name=system.name,
        )


@dataclass
class AnalyticStepModel:
    """Roofline StepModel of one replica: `chips` chips of `hw` holding `model` (or one part of it).

    `part` is "all", "attention" (attention + embeddings, for the attention side of AFD) or
    "ffn" (FFN/MoE only, for the FFN side). `stages` is the LPX pipeline depth (default: one
    stage per layer, capped by the chip count); ignored on a GPU. `tp` is the GPU tensor-parallel
    degree for collective overheads (default: all chips).
    """

    model: ModelSpec
    hw: AnalyticHardware
    chips: int
    weights: str = "fp8"
    kv: str = "bf16"
    part: str = "all"
    stages: int | None = None
    tp: int | None = None
    max_batch_size: int = 512
    kv_layout: str = "separate"
    label: str = ""
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.chips < 1:
            raise UserError("chips", f"expected >= 1 chips, got {self.chips}")
        if self.part not in ("all", "attention", "ffn"):
            raise UserError("part", f"expected all | attention | ffn, got {self.part!r}")
        self._wb = get_precision(self.weights, "weights").bytes_per_element
        self._compute = get_precision(self.weights, "weights").compute
        get_precision(self.kv, "kv")
        if self.kv_capacity_bytes() <= 0:
            raise DoesNotFit(
                "chips",
                f"{self.model.name} {self.part} weights ({self.weight_bytes / 1e9:.1f} GB {self.weights}) do not fit "
                f"{self.chips} x {self.hw.memory_bytes / 1e9:.1f} GB on {self.hw.name}",
            )

    # --- protocol: identity ---------------------------------------------------------
    @property
    def name(self) -> str:
        return self.label or f"analytic {self.model.name} on {self.chips} x {self.hw.name}"

    @property
    def power_w(self) -> float:
        return self.hw.power_w * self.chips

    @property
    def num_layers(self) -> int:
        return self.model.num_layers

    @property
    def activation_bytes_per_token(self) -> float:
        """Bytes of one token's hidden state crossing an attention/FFN boundary (bf16)."""
        return 2.0 * self.model.hidden_size

    @cached_property
    def pipeline_stages(self) -> int:
        if self.hw.kind != "lpu":
            return 1
        return max(1, min(self.stages or self.model.num_layers, self.chips))

    # --- bytes and FLOPs ------------------------------------------------------------
    @cached_property
    def _params(self) -> tuple[float, float, float]:
        """(attention + embedding + norm params, dense-FFN params, routed-expert params)."""
        pc = param_counts(self.model)
        attn = sum(p.attention + p.norms for p in pc.layers) + pc.embedding + pc.lm_head + pc.final_norm
        dense = expert_total = 0.0
        for layer, p in zip(self.model.layers, pc.layers, strict=True):
            if layer.ffn.is_moe:
                f = layer.ffn
                per_expert = (p.ffn_total - p.ffn_active) / max(1, f.num_experts - f.top_k)
                routed_total = per_expert * f.num_experts
                dense += p.ffn_total - routed_total
                expert_total += routed_total
            else:
                dense += p.ffn_total
        return attn, dense, expert_total

    @cached_property
    def weight_bytes(self) -> float:
        attn, dense, experts = self._params
        parts = {"all": attn + dense + experts, "attention": attn, "ffn": dense + experts}
        return parts[self.part] * self._wb

    @cached_property
    def _moe(self):
        return next((layer.ffn for layer in self.model.layers if layer.ffn.is_moe), None)

    def _weights_touched(self, tokens: int) -> float:
        attn, dense, experts = self._params
        touched = dense
        f = self._moe
        if f is not None:
            frac = expected_experts_touched(f.num_experts, f.top_k, tokens) / f.num_experts
            touched += experts * frac
        if self.part == "attention":
            touched = 0.0
        if self.part != "ffn":
            touched += attn
        return touched * self._wb

    @cached_property
    def _mm_flops(self) -> float:
        pc = param_counts(self.model)
        attn_mm = sum(p.attention for p in pc.layers) + (pc.lm_head or pc.embedding)
        ffn_mm = sum(p.ffn_active for p in pc.layers)
        return 2.0 * {"all": attn_mm + ffn_mm, "attention": attn_mm, "ffn": ffn_mm}[self.part]

    def _matmul_flops_per_token(self) -> float:
        return self._mm_flops

    @cached_property
    def _per_layer(self) -> tuple[float, list[tuple[int, float]], float, list[tuple[int, float]]]:
        """KV bytes per token and attention FLOPs per context token, for full and windowed layers.

        kv_bytes(c) = full * c + sum(b_w * min(c, w)), attention FLOPs likewise: the same rules as
        `specs.accounting`, read per layer once because the simulator asks millions of times.
        """
        m = self.model
        kv_full, kv_win, fl_full, fl_win = 0.0, {}, 0.0, {}
        for layer in m.layers:
            one = _one_layer(m, layer)
            b = kv_bytes_per_sequence(one, 1, self.kv, self.kv_layout)
            f = attention_flops_per_token(one, 1)
            w = layer.attention.window
            if w is None:
                kv_full += b
                fl_full += f
            else:
                kv_win[w] = kv_win.get(w, 0.0) + b
                fl_win[w] = fl_win.get(w, 0.0) + f
        return kv_full, sorted(kv_win.items()), fl_full, sorted(fl_win.items())

    def kv_bytes(self, context: int) -> float:
        if self.part == "ffn":
            return 0.0
        full, win, _, _ = self._per_layer
        c = int(context)
        return full * c + sum(b * min(c, w) for w, b in win)

    def _attn_flops(self, context: int) -> float:
        _, _, full, win = self._per_layer
        c = int(context)
        return full * c + sum(f * min(c, w) for w, f in win)

    def kv_capacity_bytes(self) -> float:
        return self.chips * self.hw.memory_bytes * self.hw.usable_memory_fraction - self.weight_bytes

    def max_batch(self) -> int:
        return self.max_batch_size

    # --- timing ---------------------------------------------------------------------
    def _roofline(self, bytes_: float, flops: float) -> float:
        eff_m, eff_f = (LPU_MEM_EFF, LPU_FLOP_EFF) if self.hw.kind == "lpu" else (GPU_MEM_EFF, GPU_FLOP_EFF)
        t_mem = bytes_ / (self.chips * self.hw.memory_bw_Bps * eff_m)
        t_flop = flops / (self.chips * self.hw.peak(self._compute) * eff_f)
        return max(t_mem, t_flop)

    def _gpu_overhead(self) -> float:
        tp = self.tp or self.chips
        collectives = 2 * self.model.num_layers * GPU_ALLREDUCE_S if tp > 1 else 0.0
        if self.part != "all":
            collectives /= 2  # one all-reduce per layer on each side of an attention/FFN split
        return GPU_STEP_OVERHEAD_S + collectives

    def _cost(self, sweep_s: float, fill_s: float) -> StepCost:
        """GPU: serial. LPX: interval = one stage's share, latency = pipeline fill + hops."""
        if self.hw.kind != "lpu":
            return StepCost.serial(sweep_s + self._gpu_overhead())
        s = self.pipeline_stages
        hops = s * 3 * self.hw.hop_latency_s  # stage hand-off + TP reduce-scatter/all-gather inside a stage
        return StepCost(latency_s=fill_s + hops, interval_s=sweep_s)

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        key = ("d", batch.contexts) if batch.size <= 4 else ("d", batch.size, sum(batch.contexts))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        b = batch.size
        kv_read = sum(self.kv_bytes(c) for c in batch.contexts) if b <= 4 else b * self.kv_bytes(
            sum(batch.contexts) // b
        )
        attn_fl = 0.0
        if self.part != "ffn":
            attn_fl = sum(self._attn_flops(c) for c in batch.contexts) if b <= 4 else (
                b * self._attn_flops(sum(batch.contexts) // b)
            )
        sweep = self._roofline(self._weights_touched(b) + kv_read, b * self._matmul_flops_per_token() + attn_fl)
        # LPX: each stage holds 1/s of the bytes on 1/s of the chips, so a stage time equals the
        # whole-replica sweep, and one micro-batch crosses all s stages.
        cost = self._cost(sweep, sweep * self.pipeline_stages)
        self._cache[key] = cost
        return cost

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        key = ("p", chunk.tokens, chunk.context, chunk.sequences)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        t, c, s = chunk.tokens, chunk.context, chunk.sequences
        tokens = t * s
        mid = c + t / 2.0
        attn_fl = 0.0 if self.part == "ffn" else tokens * self._attn_flops(int(mid))
        kv_rw = s * self.kv_bytes(c + t)
        sweep = self._roofline(self._weights_touched(tokens) + kv_rw, tokens * self._matmul_flops_per_token() + attn_fl)
        # LPX: tokens stream through the stages; latency = the chunk's sweep + one weight sweep
        # per stage to fill the pipeline.
        fill = sweep + self._roofline(self._weights_touched(1), 0.0)
        cost = self._cost(sweep, fill)
        self._cache[key] = cost
        return cost

    def verify(self, batch: DecodeBatch, k: int) -> StepCost:
        """k draft tokens + 1 bonus position per sequence: a prefill chunk of k+1 over each context."""
        ctx = sum(batch.contexts) // max(1, batch.size)
        return self.prefill(PrefillChunk(tokens=k + 1, context=ctx, sequences=batch.size))

    # --- optional split protocol (attention / FFN disaggregation) -------------------
    def attention_step(self, batch: DecodeBatch) -> StepCost:
        return self._split("attention").decode_step(batch)

    def attention_prefill(self, chunk: PrefillChunk) -> StepCost:
        return self._split("attention").prefill(chunk)

    def ffn_step(self, tokens: int) -> StepCost:
        return self._split("ffn").decode_step(DecodeBatch.uniform(max(1, tokens), 1))

    def _split(self, part: str) -> AnalyticStepModel:
        if self.part == part:
            return self
        key = ("split", part)
        m = self._cache.get(key)
        if m is None:
            m = AnalyticStepModel(
                self.model, self.hw, self.chips, self.weights, self.kv, part=part, stages=self.stages,
                tp=self.tp, max_batch_size=self.max_batch_size, kv_layout=self.kv_layout,
            )
            self._cache[key] = m
        return m


def _one_layer(m: ModelSpec, layer) -> ModelSpec:
    """A one-layer copy of `m` (to read per-layer KV/FLOP coefficients through `specs.accounting`)."""
    from dataclasses import replace

    return replace(m, layers=(layer,))


def stage_count_note(model: ModelSpec, chips: int) -> str:
    """Human-readable description of the default LPX layout (for reports)."""
    s = max(1, min(model.num_layers, chips))
    return f"{s} pipeline stages x {math.floor(chips / s)}+ chips"


def double_for_pool(pool, part: str = "all", field: str = "pools") -> AnalyticStepModel:
    """The double for one fleet pool (`lpxsim.serving.config.PoolConfig`), as the serving layer would size it."""
    from dataclasses import replace

    from lpxsim.catalog import get_system
    from lpxsim.serving.backends import chips_per_worker, pool_model

    system = get_system(pool.system)
    hw = AnalyticHardware.from_system(system)
    if pool.memory_fraction is not None:
        hw = replace(hw, usable_memory_fraction=pool.memory_fraction)
    return AnalyticStepModel(pool_model(pool), hw, chips_per_worker(pool), weights=pool.weights, kv=pool.kv,
                             part=part, tp=pool.tp,
                             kv_layout=pool.kv_layout, label=f"double {pool.model} on {system.name}[{part}]")


def use_double(monkeypatch) -> None:
    """Every pool with `backend: auto` runs on the double for the rest of the test (explicit gpu/lpx pools
    keep their detailed backend); the serving layer's step-model memo is a fresh one, so nothing built
    here leaks into another test."""
    import lpxsim.serving.backends as sb

    real = sb._build_step_model

    def build(pool, part, field):
        if pool.backend == "auto":
            return double_for_pool(pool, part, field)
        return real(pool, part, field)

    monkeypatch.setattr(sb, "_MEMO", {})
    monkeypatch.setattr(sb, "_build_step_model", build)
    use_double_in_engine(monkeypatch)


def use_double_in_engine(monkeypatch) -> None:
    """The engine's deployments (`lpxsim.engine.deployment.place`) build the double too, from a fresh memo."""
    import lpxsim.backends.factory as factory
    from lpxsim.catalog import get_model
    from lpxsim.engine import deployment

    def make(model, system, layout=None, weights="fp8", kv="bf16", kv_layout="separate"):
        return double_factory(get_model(model), system, layout, weights, kv, kv_layout)

    monkeypatch.setattr(factory, "make_step_model", make)
    # a memo of its own for the test: the process-wide one never holds a double
    monkeypatch.setattr(deployment, "_place", functools.lru_cache(maxsize=128)(deployment._place.__wrapped__))


def double_factory(model, system, layout, weights, kv, kv_layout):
    """An `lpxsim.plan.operating_point` step factory that builds the double (plan tests of the search logic)."""
    from lpxsim.catalog import get_system

    s = get_system(system)
    chips = layout.chips or layout.gpus or int(round((layout.racks or 1.0) * s.chips_per_unit))
    return AnalyticStepModel(model, AnalyticHardware.from_system(s), chips, weights=weights, kv=kv,
                             kv_layout=kv_layout, label=f"double {model.name} on {s.name}")


@pytest.fixture(scope="module")
def serving_double():
    """`use_double` for a whole test module (`pytestmark = pytest.mark.usefixtures("serving_double")`)."""
    with pytest.MonkeyPatch.context() as mp:
        use_double(mp)
        yield
