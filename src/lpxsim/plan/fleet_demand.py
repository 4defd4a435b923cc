"""Demand files: request classes with their SLOs, candidate systems, precisions and fleet-wide limits (YAML).

A mistake is one `UserError` naming the field (`classes.0.isl`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lpxsim.catalog import get_system
from lpxsim.core.errors import UserError
from lpxsim.plan.fleet_types import FleetLimits, RequestClass, SystemChoice


class ClassSpec(BaseModel):
    """A request class in a demand YAML."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: str
    model: str
    isl: int = Field(gt=0, le=10_000_000)  # ranges: lpxsim.core.inputs (issue 15)
    osl: int = Field(gt=0, le=10_000_000)
    tok_s_user: float = Field(gt=0, le=1e6)
    requests_per_s: float | None = Field(default=None, gt=0, le=1e9)
    concurrent_sessions: float | None = Field(default=None, gt=0, le=1e9)
    new_tokens: int | None = Field(default=None, gt=0, le=10_000_000)
    mtp: int = Field(default=0, ge=0, le=32)
    accept: float = Field(default=0.0, ge=0.0, lt=1.0)
    ttft_p99_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_demand(self) -> ClassSpec:
        if (self.requests_per_s is None) == (self.concurrent_sessions is None):
            raise ValueError("give exactly one of requests_per_s or concurrent_sessions")
        if self.new_tokens is not None and self.new_tokens > self.isl:
            raise ValueError(f"new_tokens {self.new_tokens:,} exceeds isl {self.isl:,}")
        return self


class SystemEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    cost_per_rack: float | None = Field(default=None, gt=0)
    max_racks: int | None = Field(default=None, ge=0)
    redundancy: int | None = Field(default=None, ge=0, le=64)  # N+k for this pool (default: the file's)


class DemandSpec(BaseModel):
    """A demand file: request classes, candidate systems, precisions."""

    model_config = ConfigDict(extra="forbid")
    classes: list[ClassSpec] = Field(min_length=1)
    systems: list[SystemEntry] = Field(default_factory=lambda: [SystemEntry(name=n) for n in DEFAULT_SYSTEMS])
    weights: str = "fp8"
    kv: str = "bf16"
    kv_layout: str = "separate"
    # the Rubin + LPX modes (PD, AFD, drafter) as pool types too, each simulated on the detailed backends
    # (needs vr-nvl72 and lpx among the systems; every system with and without MTP is always a pool type)
    options: bool = False
    redundancy: int = Field(default=0, ge=0, le=64)  # N+k spares per pool
    max_total_racks: int | None = Field(default=None, ge=0)
    max_facility_kw: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    objective: Literal["auto", "power", "tco"] = "auto"  # auto: power, or cost_per_rack when given
    # a replica may span two racks (its chips over a rack boundary); default: each keeps to whole racks
    allow_straddle: bool = False

    def limits(self) -> FleetLimits:
        kw = self.max_facility_kw
        return FleetLimits(self.max_total_racks, None if kw is None else kw * 1e3)

    def request_classes(self) -> list[RequestClass]:
        names = [c.name for c in self.classes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise UserError("classes.name", f"duplicate class name(s): {', '.join(dup)}")
        return [RequestClass(c.name, c.model, c.isl, c.osl, c.tok_s_user, c.requests_per_s, c.concurrent_sessions,
                             c.new_tokens, c.mtp, c.accept, c.ttft_p99_s) for c in self.classes]

    def system_choices(self) -> list[SystemChoice]:
        return [SystemChoice(get_system(s.name).name, s.cost_per_rack, s.max_racks,
                             self.redundancy if s.redundancy is None else s.redundancy) for s in self.systems]


DEFAULT_SYSTEMS = ("lpx", "vr-nvl72", "gb200-nvl72")


def _field_path(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "demand"


def parse_demand(raw: object) -> DemandSpec:
    """Validate a parsed demand document; a mistake is one UserError naming the field."""
    if not isinstance(raw, dict):
        raise UserError("demand", "expected a mapping with a 'classes' list")
    try:
        return DemandSpec.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise UserError(_field_path(err["loc"]), err["msg"].removeprefix("Value error, ")) from None


def load_demand(path: str | Path) -> DemandSpec:
    """Read and validate a demand YAML file."""
    from lpxsim.core.structured import read_yaml as read_capped  # size, UTF-8, depth, number caps

    raw = read_capped(Path(path), "demand")
    return parse_demand(raw)
