"""A StepModel for wafer-scale engines (Cerebras CS-3 / CS-4): SRAM-resident weights, layers as pipeline stages.

The rule (docs/assumptions.md, "Cerebras wafer-scale backend (issue 14)"):

- Placement. Every weight and every KV byte lives in on-wafer SRAM; there is no HBM and no weight
  streaming. The model's layers (and the output head) are cut into contiguous segments, one per
  wafer, balanced by weight bytes; a replica needs enough wafers that each holds its segment within
  (1 - reserve) of its SRAM. Inside a wafer each layer gets a region of cores in proportion to its
  weight bytes, and with them the same share of the wafer's SRAM bandwidth and FLOP/s.
- A layer is a pipeline stage laid out as a square tile of the wafer's 2D mesh (side sqrt(its share
  of the cores)), the compact placement that makes its broadcasts and reductions shortest.
  Its occupancy for `tokens` tokens is the largest of
  (a) streaming: each dependent matmul's input vector is spread over the tile's rows, whose ports
      carry their segments in parallel; tokens follow one another;
  (b) compute: matmul + attention FLOPs / (region's share of peak x efficiency);
  (c) SRAM: weights touched + KV read / (region's share of SRAM bandwidth x efficiency).
  Its latency adds the wavefronts: every dependent phase of the layer (norm, projections, scores,
  attention-times-V, output projection, MLP up and down, router) broadcasts or reduces across the
  tile, one fabric hop per row, so a layer costs phases x side x hop: the square root of its share of
  the wafer, not its width. This is why per-layer time grows slowly with model width.
- Between wafers the activations cross the system I/O (bytes / link bandwidth + latency).
- latency = sum of stage latencies + hand-offs; interval = the slowest stage occupancy (or hand-off):
  layers are pipelined, so many micro-batches are in flight, which is why batch-1 speed and capacity
  differ.

Serving and planning see only the StepModel protocol.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

from lpxsim.catalog import get_model, get_system
from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.specs.accounting import kv_bytes_per_sequence, kv_elements_per_token, layer_params, param_counts
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import LayerSpec, ModelSpec
from lpxsim.specs.precision import get_precision
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost

ACTIVATION_BYTES = 2.0  # 16-bit activations on the fabric (Cerebras runs FP16/BF16 datapaths)
MAX_BATCH = 4096  # decode sequences per step; the KV ceiling binds long before at real contexts


@dataclass(frozen=True)
class WaferParams:
    """The per-wafer numbers the rule needs (SI), read from a catalog system."""

    sram_bytes: float
    sram_Bps: float
    flops: float
    cores: float
    port_Bps: float
    reserve_fraction: float
    flop_efficiency: float
    sram_efficiency: float
    hop_s: float  # one fabric hop (router to neighbouring core)
    io_Bps: float  # wafer-to-wafer hand-off bandwidth between units (system I/O), per direction
    io_latency_s: float
    unpublished: bool  # any core number graded U
    link_Bps: float = 0.0  # between wafers of one unit (CS-4 Direct Wafer Links); 0: none
    link_latency_s: float = 0.0
    wafers_per_unit: int = 1

    @classmethod
    def from_system(cls, s: SystemSpec, compute: str) -> WaferParams:
        c = s.chip
        io = s.topology.links["scale_out"]
        inner = s.topology.links.get("scale_up") if s.chips_per_unit > 1 else None
        core = [c.memory_bytes, c.memory_bw_Bps, c.extra["cores"], c.extra["fabric_port_Bps"]]  # published on CS-3
        return cls(
            sram_bytes=float(c.memory_bytes), sram_Bps=float(c.memory_bw_Bps), flops=c.flops(compute),
            cores=float(c.extra["cores"]), port_Bps=float(c.extra["fabric_port_Bps"]),
            hop_s=float(c.extra["fabric_hop_s"]),
            reserve_fraction=float(c.extra["memory_reserve_fraction"]),
            flop_efficiency=float(c.extra["flop_efficiency"]), sram_efficiency=float(c.extra["sram_efficiency"]),
            io_Bps=io.bandwidth_Bps, io_latency_s=float(io.latency_s),
            unpublished=any(v.grade == "U" for v in core),
            link_Bps=inner.bandwidth_Bps if inner else 0.0, link_latency_s=float(inner.latency_s) if inner else 0.0,
            wafers_per_unit=s.chips_per_unit,
        )


@dataclass(frozen=True)
class Stage:
    """One pipeline stage (a transformer layer or the output head) placed on one wafer."""

    wafer: int
    weight_bytes: float
    active_weight_bytes: float
    active_params: float
    stream_elements: int  # elements of the dependent input vectors one token pushes through the fabric
    layer: LayerSpec | None  # None for the input table and the output head
    phases: int = 1  # dependent broadcast / reduction phases, each a wavefront across the tile


def stream_elements(layer: LayerSpec, hidden: int) -> int:
    """Elements of the serial input vectors of one layer's dependent matmuls, per token.

    q/k/v projections share the block input (hidden); MLA adds the q and kv low-rank inputs; the output
    projection reads heads x v_head_dim; the MLP's up/gate (and the router) share its input (hidden);
    the down projection reads one FFN width (routed experts stream in parallel regions, so one expert's).
    """
    a, f = layer.attention, layer.ffn
    n = hidden + a.num_heads * a.v_head_dim + hidden
    if a.kind == "mla":
        n += (a.q_lora_rank or 0) + a.kv_lora_rank
    widths = []
    if f.kind == "moe":
        widths.append(f.expert_intermediate)
        if f.dense_beside_experts and f.intermediate:
            widths.append(f.intermediate)
    else:
        widths.append(f.intermediate)
    return n + max(widths)


def dependent_phases(layer: LayerSpec) -> int:
    """Phases of one layer that must each finish before the next starts (a broadcast or a reduction
    across the layer's cores): attention norm, q/k/v projection, scores and softmax, attention times V,
    output projection; MLP norm, up/gate projection, down projection; MLA adds the low-rank q and kv
    projections, MoE the router and the weighted combine of the experts' outputs."""
    n = 5 + 3
    if layer.attention.kind == "mla":
        n += 1
    if layer.ffn.kind == "moe":
        n += 2
    return n


HEAD_PHASES = 3  # final norm, lm_head projection, the argmax / sampling reduction over the vocabulary


class WseStepModel:
    """One replica of a model on a chain of wafers (CS-3 systems, or the wafers of CS-4 racks)."""

    def __init__(self, model: str | ModelSpec, system: str = "cs-3", wafers: int | None = None,
                 weights: str = "bf16", kv: str = "bf16", kv_layout: str = "separate") -> None:
        self.model = get_model(model)
        self.system = get_system(system)
        if not self.system.is_wafer:
            raise UserError("system", f"{self.system.name} is not a wafer-scale system")
        self.weights, self.kv, self.kv_layout = weights, kv, kv_layout
        self._wp = get_precision(weights, "weights")
        get_precision(kv, "kv")
        self.hw = WaferParams.from_system(self.system, self._wp.compute)
        self._stages_all = self._stage_list()
        usable = self._usable()
        self.wafers = self.wafers_needed() if wafers is None else int(wafers)
        if self.wafers < 1:
            raise UserError("chips", f"expected a positive number of wafers, got {wafers}")
        if self.wafers > self.system.max_units * self.system.chips_per_unit:
            raise UserError("chips", f"{self.system.name} joins at most "
                            f"{self.system.max_units * self.system.chips_per_unit} wafers, got {self.wafers}")
        self.stages = self._place(self._stages_all, self.wafers, usable)

    # ---- placement
    def _stage_list(self) -> list[Stage]:
        """The input embedding, the layers, then the output head (a tied table is held once, at the head)."""
        m, b = self.model, self._wp.bytes_per_element
        pc = param_counts(m)
        table = pc.embedding if pc.lm_head else 0  # untied: the input table is its own stage's weights
        out = [Stage(0, table * b, 0.0, 0.0, 0, None, 0)]  # a row lookup: no dependent phase
        for layer in m.layers:
            lp = layer_params(layer, m.hidden_size)
            out.append(Stage(0, lp.total * b, lp.active * b, float(lp.active), stream_elements(layer, m.hidden_size),
                             layer, dependent_phases(layer)))
        head = pc.lm_head or pc.embedding
        out.append(Stage(0, (head + pc.final_norm) * b, head * b, float(head), m.hidden_size, None, HEAD_PHASES))
        return out

    def _usable(self) -> float:
        return self.hw.sram_bytes * (1.0 - self.hw.reserve_fraction)

    @staticmethod
    def _fill(stages: list[Stage], cap: float) -> list[int]:
        """Wafer of each stage when stages are packed in order, a new wafer whenever `cap` would overflow."""
        wafer, load, out = 0, 0.0, []
        for st in stages:
            if load > 0 and load + st.weight_bytes > cap:
                wafer, load = wafer + 1, 0.0
            out.append(wafer)
            load += st.weight_bytes
        return out

    def wafers_needed(self) -> int:
        """Fewest wafers whose usable SRAM holds the weights as contiguous segments (KV is checked by capacity)."""
        if max(st.weight_bytes for st in self._stages_all) > self._usable():
            raise DoesNotFit("chips", f"one layer of {self.model.name} exceeds a {self.system.chip.name}'s SRAM")
        return self._fill(self._stages_all, self._usable())[-1] + 1

    def _place(self, stages: list[Stage], wafers: int, usable: float) -> list[Stage]:
        """Contiguous segments, one per wafer, minimising the fullest wafer (bisection on the per-wafer load)."""
        need = self.wafers_needed()
        if wafers < need:
            total = sum(st.weight_bytes for st in stages)
            raise DoesNotFit(
                "chips", f"{self.model.name} ({self.weights}, {total / 1e9:,.1f} GB) does not fit {wafers} x "
                f"{self.system.chip.name} ({usable / 1e9:,.1f} GB usable each); it needs {need} wafers")
        lo, hi = max(st.weight_bytes for st in stages), usable
        for _ in range(60):  # the least per-wafer load that packs into `wafers` wafers
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if self._fill(stages, mid)[-1] + 1 <= wafers else (mid, hi)
        where = self._fill(stages, hi)
        placed = [replace(st, wafer=w) for w, st in zip(where, stages, strict=True)]
        used = where[-1] + 1  # a tiny model may not spread over every wafer it was given
        self._wafer_bytes = [sum(st.weight_bytes for st in placed if st.wafer == w) for w in range(wafers)]
        self._used_wafers = used
        return placed

    # ---- StepModel protocol
    @property
    def name(self) -> str:
        flag = " (unpublished specs: every number graded U)" if self.hw.unpublished else ""
        return f"{self.system.name} {self.wafers}-wafer pipeline {self.weights}{flag}"

    @property
    def chips(self) -> int:
        return self.wafers

    @property
    def power_w(self) -> float:
        return float(self.system.power_w) * self.wafers / self.system.chips_per_unit

    def _region_share(self, st: Stage) -> float:
        """Share of its wafer's cores (and SRAM bandwidth, FLOP/s) a stage's region gets."""
        return max(st.weight_bytes, 1.0) / max(self._wafer_bytes[st.wafer], 1.0)

    def _kv_read_bytes(self, layer: LayerSpec, context: int) -> float:
        kvb = get_precision(self.kv, "kv").bytes_per_element
        a = layer.attention
        t = context if a.window is None else min(context, a.window)
        return kv_elements_per_token(a, self.kv_layout) * kvb * t

    def _attn_flops(self, layer: LayerSpec, context: int) -> float:
        a = layer.attention
        t = context if a.window is None else min(context, a.window)
        if a.kind == "mla":
            return 2.0 * a.num_heads * t * (a.kv_lora_rank + a.qk_rope_head_dim + a.kv_lora_rank)
        return 2.0 * a.num_heads * t * (a.head_dim + a.v_head_dim)

    def tile_rows(self, st: Stage) -> int:
        """Side of a stage's square tile of cores: sqrt of its share of the wafer's cores."""
        return max(1, math.isqrt(int(self.hw.cores * self._region_share(st))))

    def stage_occupancy(self, st: Stage, tokens: int, sequences: int, context: int) -> float:
        """Seconds a stage is busy with `tokens` tokens (of `sequences` sequences) at mean `context`: the
        largest of streaming, compute and SRAM (they overlap in a dataflow core)."""
        share = self._region_share(st)
        rows = self.tile_rows(st)
        stream = tokens * math.ceil(st.stream_elements / rows) * ACTIVATION_BYTES / self.hw.port_Bps
        flops = 2.0 * st.active_params * tokens
        kv_bytes = 0.0
        if st.layer is not None:
            flops += self._attn_flops(st.layer, context) * tokens
            kv_bytes = self._kv_read_bytes(st.layer, context) * sequences
        compute = flops / (self.hw.flops * share * self.hw.flop_efficiency)
        sram = (st.active_weight_bytes + kv_bytes) / (self.hw.sram_Bps * share * self.hw.sram_efficiency)
        return max(stream, compute, sram)

    def wavefront_s(self, st: Stage) -> float:
        """Latency of a stage's dependent phases, each one traversal of its tile."""
        return st.phases * self.tile_rows(st) * self.hw.hop_s

    def stage_time(self, st: Stage, tokens: int, sequences: int, context: int) -> float:
        """Seconds from a stage's input to its output for `tokens` tokens: wavefronts + occupancy."""
        return self.wavefront_s(st) + self.stage_occupancy(st, tokens, sequences, context)

    def _handoff_s(self, tokens: int, wafer: int) -> tuple[float, float]:
        """(latency, occupancy) of the activation hand-off of `tokens` tokens from `wafer` to the next one:
        over the unit's wafer links inside a unit (CS-4), else over the system I/O."""
        hw = self.hw
        inside = hw.link_Bps > 0 and (wafer // hw.wafers_per_unit) == ((wafer + 1) // hw.wafers_per_unit)
        bw, lat = (hw.link_Bps, hw.link_latency_s) if inside else (hw.io_Bps, hw.io_latency_s)
        xfer = tokens * self.model.hidden_size * ACTIVATION_BYTES / bw
        return xfer + lat, xfer

    def _cost(self, tokens: int, sequences: int, context: int) -> StepCost:
        busy = [self.stage_occupancy(st, tokens, sequences, context) for st in self.stages]
        hops = [self._handoff_s(tokens, w) for w in range(self._used_wafers - 1)]
        latency = sum(busy) + sum(self.wavefront_s(st) for st in self.stages) + sum(h[0] for h in hops)
        interval = max([*busy, *(h[1] for h in hops)])  # wavefronts pipeline: the next micro-batch follows
        return StepCost(latency, interval)

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        if batch.size < 1:
            raise UserError("batch", "a decode step needs at least one sequence")
        ctx = int(round(sum(batch.contexts) / batch.size))
        return self._cost(batch.size, batch.size, ctx)

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        if chunk.tokens < 1 or chunk.sequences < 1:
            raise UserError("chunk", "a prefill chunk needs at least one token and one sequence")
        mean_ctx = chunk.context + (chunk.tokens + 1) // 2  # causal: a chunk token attends to half the chunk on average
        return self._cost(chunk.tokens * chunk.sequences, chunk.sequences, mean_ctx)

    def verify(self, batch: DecodeBatch, k: int) -> StepCost:
        if k < 0:
            raise UserError("k", f"expected k >= 0, got {k}")
        ctx = int(round(sum(batch.contexts) / max(1, batch.size)))
        return self._cost(batch.size * (k + 1), batch.size, ctx + k // 2)

    def kv_bytes(self, context: int) -> float:
        return kv_bytes_per_sequence(self.model, context, self.kv, self.kv_layout)

    @cached_property
    def _kv_capacity(self) -> float:
        usable = self.hw.sram_bytes * (1.0 - self.hw.reserve_fraction) * self.wafers
        return max(0.0, usable - sum(self._wafer_bytes))

    def kv_capacity_bytes(self) -> float:
        return self._kv_capacity

    def max_batch(self) -> int:
        return MAX_BATCH
