"""Hardware specs: chips, link classes, nodes, racks and systems, loaded from catalog YAML.

Every number is a `Sourced` value: value, unit, source key, grade (P primary,
S third party, E derived, U assumed) and an optional note. Source keys are the
ones of shared reference hardware.md §11 (NV-LPX, SA, HC26, STAS, ...), or
"assumption:<name>" pointing into docs/assumptions.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

Grade = Literal["P", "S", "E", "U"]


# Link roles that make up a unit's scale-up fabric (what vendors quote as "scale-up bandwidth").
SCALE_UP_ROLES = ("intra_node", "inter_node", "scale_up")


class ProvenanceRow(NamedTuple):
    """One sourced number of a system: where it sits in the spec and where it comes from."""

    path: str
    value: float
    unit: str
    source: str
    grade: str
    note: str


# Every model here is built with defer_build: pydantic makes a class's validator on its first use, not at
# import (building them all at import was ~65 ms of a warm `lpxsim estimate`, most of it for classes that
# a warm run validates only through SystemSpec, if at all).


class Sourced(BaseModel):
    """A number with its provenance."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    value: float
    unit: str
    source: str
    grade: Grade
    note: str = ""

    def __float__(self) -> float:
        return float(self.value)

    @field_validator("source")
    @classmethod
    def _source_nonempty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("every number needs a source")
        return v


class LinkClass(BaseModel):
    """A class of point-to-point links (e.g. LPX intra-node, inter-node, inter-rack; NVLink)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str
    lanes_per_link: Sourced  # lanes in one link between two endpoints
    lane_bps: Sourced  # effective data rate per lane per direction, bit/s
    latency_s: Sourced  # first-bit latency of one hop (SRAM to SRAM on LPX)
    description: str = ""
    lane_line_bps: Sourced | None = (
        None  # signalling (line) rate per lane, bit/s, where it differs from lane_bps
    )
    lanes_per_chip: Sourced | None = None  # lanes each chip spends on this class in total (lane budget)

    @property
    def line_bandwidth_Bps(self) -> float:
        """Bytes per second per direction of one link at the line rate (lane_bps if no line rate is given)."""
        rate = self.lane_line_bps if self.lane_line_bps is not None else self.lane_bps
        return float(self.lanes_per_link) * float(rate) / 8.0

    @property
    def bandwidth_Bps(self) -> float:
        """Bytes per second per direction of one link."""
        return float(self.lanes_per_link) * float(self.lane_bps) / 8.0


class ChipSpec(BaseModel):
    """One accelerator die/package: an LPU (SRAM-only), a GPU (HBM) or a wafer-scale engine (SRAM-only wafer)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str
    kind: Literal["lpu", "gpu", "wse"]
    description: str = ""
    memory_bytes: Sourced  # on-chip SRAM (LPU, wafer) or HBM (GPU)
    memory_bw_Bps: Sourced  # SRAM or HBM bandwidth
    peak_flops: dict[str, Sourced]  # dense FLOP/s by compute format: bf16, fp8, fp4, int8
    power_w: Sourced
    clock_hz: Sourced | None = None
    # LPU micro-architecture (unit sizes, latencies; most are assumptions)
    vector_bytes: Sourced | None = None
    c2c_lanes: Sourced | None = None
    lpu: dict[str, Sourced] = Field(default_factory=dict)
    # GPU scale-up port
    nvlink_Bps: Sourced | None = None  # per direction per GPU
    extra: dict[str, Sourced] = Field(default_factory=dict)

    def flops(self, compute: str) -> float:
        """Peak dense FLOP/s for a compute format, falling back to the nearest wider supported format."""
        order = ["fp4", "fp8", "int8", "bf16"]
        if compute in self.peak_flops:
            return float(self.peak_flops[compute])
        start = order.index(compute) if compute in order else 0
        for alt in order[start:]:
            if alt in self.peak_flops:
                return float(self.peak_flops[alt])
        raise KeyError(f"{self.name} has no peak FLOP figure for {compute}")


class Topology(BaseModel):
    """How chips are wired. LPX: nodes of all-to-all chips, one partner per other node, racks chained."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    kind: Literal["lpx-nodes", "dragonfly", "nvlink-domain", "hgx", "wafer"]
    chips_per_node: int
    nodes_per_rack: int
    links: dict[str, LinkClass]  # keyed by role: intra_node, inter_node, inter_rack, scale_out, ...
    description: str = ""


class SystemSpec(BaseModel):
    """A deployable system: a rack (or HGX node) of one chip type, optionally several of them."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str
    title: str
    chip: ChipSpec
    topology: Topology
    unit_name: str = "rack"  # what one unit of this system is called (rack, node)
    vendor: str = ""  # the chip's maker (NVIDIA, AMD, ...): which validation data speaks for this system
    power_w: Sourced  # per unit (rack or node), all-in
    max_units: int = 1  # how many units can be joined (racks chained, nodes over IB)
    variants: dict[str, Topology] = Field(default_factory=dict)  # e.g. LPX 32x8 trays
    aliases: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    # Per-unit figures as the vendor publishes them (e.g. LPX rack 640 TB/s). Used for consistency checks
    # against the chip x topology arithmetic, never as inputs to a computation.
    published: dict[str, Sourced] = Field(default_factory=dict)

    @property
    def chips_per_unit(self) -> int:
        return self.topology.chips_per_node * self.topology.nodes_per_rack

    @property
    def is_lpu(self) -> bool:
        return self.chip.kind == "lpu"

    @property
    def is_wafer(self) -> bool:
        """A wafer-scale system (Cerebras): one chip per wafer, weights and KV in on-wafer SRAM."""
        return self.chip.kind == "wse"

    def with_topology(self, variant: str) -> SystemSpec:
        """This system with a named topology variant (e.g. 'trays-32x8')."""
        if variant not in self.variants:
            from lpxsim.core.errors import UserError

            if not self.variants:
                raise UserError("topology", f"{self.name} has one topology (no variants); got {variant!r}")
            raise UserError(
                "topology", f"unknown variant {variant!r}; expected one of {', '.join(self.variants)}"
            )
        return self.model_copy(update={"topology": self.variants[variant]})

    def chips_from(self, racks: float | None = None, chips: int | None = None) -> int:
        """Chips asked for by `--racks` (whole chips only) or `--chips`; one unit when neither is given."""
        from lpxsim.core.errors import UserError

        if racks is not None and chips is not None:
            raise UserError("racks", "give either racks or chips, not both")
        if chips is not None:
            if chips <= 0:
                raise UserError("chips", f"expected a positive number of chips, got {chips}")
            return int(chips)
        if racks is None:
            return self.chips_per_unit
        n = racks * self.chips_per_unit
        if not math.isfinite(n) or round(n) < 1 or abs(n - round(n)) > 1e-9:  # NaN, 1e-300, 0.3 of a chip
            raise UserError(
                "racks", f"expected a positive number of {self.unit_name}s making whole chips "
                f"({self.chips_per_unit} per {self.unit_name}), got {racks}"
            )
        return int(round(n))

    def total_chips(self, units: int = 1) -> int:
        """Chips in `units` racks (or nodes) of this system."""
        return self.chips_per_unit * _check_units(self, units)

    def memory_bytes(self, units: int = 1) -> float:
        """Accelerator memory (SRAM on LPUs, HBM on GPUs) in `units` racks or nodes, bytes."""
        return float(self.chip.memory_bytes) * self.total_chips(units)

    def memory_bw_Bps(self, units: int = 1) -> float:
        """Aggregate accelerator memory bandwidth of `units` racks or nodes, B/s."""
        return float(self.chip.memory_bw_Bps) * self.total_chips(units)

    def peak_flops(self, compute: str, units: int = 1) -> float:
        """Aggregate dense peak FLOP/s of `units` racks or nodes for a compute format."""
        return self.chip.flops(compute) * self.total_chips(units)

    def power(self, units: int = 1) -> float:
        """All-in power of `units` racks or nodes, W."""
        return float(self.power_w) * _check_units(self, units)

    def lane_budget(self) -> float:
        """Lanes (or links) each chip spends over all link classes that state `lanes_per_chip`."""
        return sum(
            float(lk.lanes_per_chip) for lk in self.topology.links.values() if lk.lanes_per_chip is not None
        )

    def scale_up_bidir_Bps(self, line_rate: bool = True) -> float:
        """Bidirectional scale-up bandwidth of one unit: chips x scale-up lanes x lane rate x 2 / 8.

        With `line_rate` the signalling rate is used, which is how vendors quote it (LPX "640 TB/s").
        """
        per_chip = 0.0
        for role in SCALE_UP_ROLES:
            lk = self.topology.links.get(role)
            if lk is None or lk.lanes_per_chip is None:
                continue
            rate = lk.lane_line_bps if line_rate and lk.lane_line_bps is not None else lk.lane_bps
            per_chip += float(lk.lanes_per_chip) * float(rate)
        return self.chips_per_unit * per_chip * 2 / 8

    def provenance_rows(self) -> list[ProvenanceRow]:
        """Every sourced number of this system, with its dotted path, in declaration order."""
        return list(_walk(self, ""))


def _check_units(system: SystemSpec, units: int) -> int:
    from lpxsim.core.errors import UserError

    if units < 1 or units > system.max_units:
        raise UserError(
            "units", f"{system.name} takes 1..{system.max_units} {system.unit_name}s, got {units}"
        )
    return units


def _walk(obj: object, path: str) -> Iterator[ProvenanceRow]:
    if isinstance(obj, Sourced):
        yield ProvenanceRow(path, float(obj.value), obj.unit, obj.source, obj.grade, obj.note)
    elif isinstance(obj, BaseModel):
        for name in type(obj).model_fields:
            yield from _walk(getattr(obj, name), f"{path}.{name}" if path else name)
    elif isinstance(obj, dict):
        for key, val in obj.items():
            yield from _walk(val, f"{path}.{key}")
