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
    # The class's workload (docs/engine.md, "Sessions"): `session: agentic`, `new_tokens` or `think_s` make it an
    # agentic session of the engine's default shape (engine.query.default_session: `new_tokens`, default 2,000,
    # and `think_s`, default 3 s, of tool time between turns, its KV held), so that concurrent_sessions counts
    # sessions held and its streams decoding are priced as `estimate` prices them; `session: none` or none of
    # the three: the no-cache loop (each request prefills its whole input). The plan's labels say which.
    session: Literal["agentic", "none"] | None = None
    new_tokens: int | None = Field(default=None, gt=0, le=10_000_000)
    think_s: float | None = Field(default=None, ge=0, le=86_400)
    mtp: int = Field(default=0, ge=0, le=32)
    accept: float = Field(default=0.0, ge=0.0, lt=1.0)
    ttft_p99_s: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _one_demand(self) -> ClassSpec:
        if (self.requests_per_s is None) == (self.concurrent_sessions is None):
            raise ValueError("give exactly one of requests_per_s or concurrent_sessions")
        if self.new_tokens is not None and self.new_tokens > self.isl:
            raise ValueError(f"new_tokens {self.new_tokens:,} exceeds isl {self.isl:,}")
        if self.session == "none" and (self.new_tokens is not None or self.think_s is not None):
            raise ValueError("new_tokens and think_s describe an agentic session, not session: none")
        return self

    def session_shape(self):
        """The class's agentic session (`engine.query.SessionShape`), or None for the no-cache loop."""
        from lpxsim.engine.query import default_session

        agentic = self.session == "agentic" or (
            self.session is None and (self.new_tokens is not None or self.think_s is not None))
        return default_session(self.isl, self.osl, self.new_tokens, self.think_s) if agentic else None


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
        out = []
        for i, c in enumerate(self.classes):
            try:
                shape = c.session_shape()
            except UserError as e:
                raise UserError(f"classes.{i}.{e.field}", e.message) from None
            new = None if shape is None else min(c.isl, shape.new_tokens)
            out.append(RequestClass(c.name, c.model, c.isl, c.osl, c.tok_s_user, c.requests_per_s,
                                    c.concurrent_sessions, new, c.mtp, c.accept, c.ttft_p99_s, shape))
        return out

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
