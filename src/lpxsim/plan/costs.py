"""The planner's economics: what a token costs and, given a price source, what it sells for.

Cost of ownership per hour of one replica = capex share / amortisation hours
+ capex share x opex fraction per year / 8,760 h + facility energy (IT power x
PUE x $/kWh, charged for every owned hour: the racks stay powered). Tokens per
owned hour = rate x 3,600 x utilisation. The headline is the whole cost over the
output tokens; the cost per input token is the same whole cost over the input
tokens (the two are two readings of one cost, not parts that add up):

    usd_per_mtok_output = cost_per_hour / (3,600 x utilisation x out) x 1e6
    usd_per_mtok_input  = cost_per_hour / (3,600 x utilisation x in) x 1e6

An allocation rule that splits the cost between the two (an input token weighs
`input_price_ratio` of an output token) is reported beside them as `alloc_*`,
named as the rule it is, never as the headline.

Revenue and margin exist only where a price source applies (`price_ladder`): the
shipped one is NVIDIA's stated "$45 per million tokens" for Rubin + LPX serving
(grade S, docs/sources.md REG-LPX-45), applied to output tokens of hardware that
includes LPX; a user's ladder (`--prices FILE`, or `price_ladder` in `--costs
FILE`) replaces it. Without a price the revenue fields are None. Every number has
a source and grade; `--costs FILE`, `--usd-per-kwh` and `--pue` override any of them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lpxsim.catalog import get_system
from lpxsim.core.datafile import read_yaml
from lpxsim.core.errors import UserError
from lpxsim.specs.hardware import Grade

HOURS_PER_YEAR = 8760.0

# Accepted ranges: wide enough for any real site, narrow enough to catch unit mistakes ($/MWh for $/kWh).
RANGES: dict[str, tuple[float, float]] = {
    "amortisation_years": (0.5, 20.0),
    "usd_per_kwh": (0.0, 2.0),
    "pue": (1.0, 3.0),
    "utilisation": (0.01, 1.0),
    "opex_fraction_per_year": (0.0, 1.0),
    "input_price_ratio": (0.0, 1.0),
}


class CostValue(BaseModel):
    """A number of the cost model with its provenance."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # NaN/inf: a one-line error
    value: float
    source: str
    grade: Grade
    note: str = ""


class PriceTier(BaseModel):
    """A price per million tokens for users served at >= min_tok_s_user on hardware that includes one of
    `systems` (every system when empty). Input tokens earn nothing unless the tier prices them."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    min_tok_s_user: float = Field(default=0.0, ge=0)
    usd_per_mtok_output: float = Field(ge=0)
    usd_per_mtok_input: float | None = Field(default=None, ge=0)
    systems: tuple[str, ...] = ()
    source: str
    grade: Grade
    note: str = ""

    @field_validator("systems")
    @classmethod
    def _catalog_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(get_system(name).name for name in v)  # aliases allowed; an unknown name is an error

    def applies(self, systems: set[str], tok_s_user: float) -> bool:
        """Whether this tier prices tokens served at `tok_s_user` on hardware made of `systems`."""
        return tok_s_user >= self.min_tok_s_user and (not self.systems or bool(set(self.systems) & systems))


class CostModel(BaseModel):
    """Capex per unit, amortisation, energy price, PUE, utilisation and the price sources (may be none)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    amortisation_years: CostValue
    usd_per_kwh: CostValue
    pue: CostValue
    utilisation: CostValue
    opex_fraction_per_year: CostValue
    input_price_ratio: CostValue
    capex_usd: dict[str, CostValue]
    price_ladder: list[PriceTier] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ranges(self) -> CostModel:
        for name, (lo, hi) in RANGES.items():
            v = getattr(self, name).value
            if not lo <= v <= hi:
                raise ValueError(f"{name} {v:g} outside [{lo:g}, {hi:g}]")
        for name, c in self.capex_usd.items():
            if c.value < 0:
                raise ValueError(f"capex_usd.{name} must not be negative, got {c.value:g}")
        for scope in {t.systems for t in self.price_ladder}:
            bounds = [t.min_tok_s_user for t in self.price_ladder if t.systems == scope]
            if bounds != sorted(bounds) or len(set(bounds)) != len(bounds):
                raise ValueError("price_ladder tiers (of the same systems) must have strictly increasing "
                                 "min_tok_s_user")
        return self

    def price_for(self, systems: Any, tok_s_user: float) -> PriceTier | None:
        """The price of tokens served at `tok_s_user` on hardware made of `systems` (names or aliases): the
        fastest applicable tier, a system's own tier before an unscoped one; None when no source applies."""
        names = {get_system(s).name for s in ([systems] if isinstance(systems, str) else systems)}
        fits = [t for t in self.price_ladder if t.applies(names, tok_s_user)]
        return max(fits, key=lambda t: (t.min_tok_s_user, bool(t.systems)), default=None)

    def capex(self, system: str) -> CostValue | None:
        """Capex of one unit of `system` (catalog name or alias), or None when the model has none."""
        return self.capex_usd.get(get_system(system).name)


def _costs_path() -> Path:
    return Path(str(resources.files("lpxsim.catalog").joinpath("costs.yaml")))


@cache
def _default_raw() -> dict:
    # libyaml's loader when built, or (unchanged file) its JSON memo: a warm estimate imports no YAML
    return read_yaml(_costs_path())


def _merge(base: dict, over: dict) -> dict:
    """Override `base` with `over` key by key; mappings merge, everything else replaces."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            merged = dict(out[k])
            for kk, vv in v.items():
                merged[kk] = {**merged[kk], **vv} if isinstance(vv, dict) and isinstance(merged.get(kk), dict) else vv
            out[k] = merged
        else:
            out[k] = v
    return out


def _validate(raw: dict, where: str) -> CostModel:
    try:
        return CostModel.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        raise UserError(f"costs.{loc}" if loc else "costs", f"{msg} ({where})") from None


def _read_file(path: str | Path, field: str = "costs") -> dict:
    from lpxsim.core.structured import read_yaml  # size, UTF-8, depth and number caps: one line each

    p = Path(path)
    raw = read_yaml(p, field)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UserError(field, f"{p.name}: expected a mapping of cost-model fields")
    # a bare number (or a value without a source) is the user's input: its provenance says so
    for k, v in list(raw.items()):
        if k in RANGES:
            raw[k] = _user_value(v, p.name)
    capex = raw.get("capex_usd")
    if isinstance(capex, dict):
        raw["capex_usd"] = {_system_key(k, p.name): _user_value(v, p.name) for k, v in capex.items()}
    if isinstance(raw.get("price_ladder"), list):
        raw["price_ladder"] = [_user_value(t, p.name) for t in raw["price_ladder"]]
    return raw


def _read_prices(path: str | Path) -> list:
    """A price file (`--prices FILE`): a mapping whose one key `price_ladder` lists the tiers; the user's
    file is the source of a tier that names none."""
    p = Path(path)
    raw = _read_file(path, "prices")
    ladder = raw.get("price_ladder") if isinstance(raw, dict) else None
    if not isinstance(ladder, list) or set(raw) - {"price_ladder"}:
        raise UserError("prices", f"{p.name}: expected price_ladder: a list of {{usd_per_mtok_output, "
                                  "min_tok_s_user, systems, source}}")
    return ladder


def _system_key(name: object, fname: str) -> str:
    """A capex key as the catalog names the system (aliases allowed); an unknown one names the field."""
    try:
        return get_system(str(name)).name
    except UserError as e:
        raise UserError(f"costs.capex_usd.{name}", f"{e.message} ({fname})") from None


_YAML_NUMBER = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+$")  # what PyYAML leaves as text


def _user_value(v: object, fname: str) -> object:
    user = {"source": f"user:{fname}", "grade": "U", "note": ""}
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {"value": float(v), **user}
    if isinstance(v, str) and _YAML_NUMBER.match(v.strip()):  # YAML 1.1 reads 3e6 and 5e-2 as text: a number meant
        return {"value": float(v), **user}
    if isinstance(v, dict) and "source" not in v:
        return {**user, **v}
    return v


def load_costs(path: str | Path | None = None, usd_per_kwh: float | None = None, pue: float | None = None,
               prices: str | Path | None = None, **overrides: float) -> CostModel:
    """The shipped cost model, overridden by a YAML file, then by a price file (`prices`: its ladder replaces
    the shipped price source whole), then by single values (CLI flags).

    A bad file or value is one UserError naming the field.
    """
    raw = _default_raw()
    where = "catalog/costs.yaml"
    if path is not None:
        raw = _merge(raw, _read_file(path))
        where = Path(path).name
    if prices is not None:
        raw = {**raw, "price_ladder": _read_prices(prices)}
        where = f"{where} + {Path(prices).name}"
    flags = {"usd_per_kwh": usd_per_kwh, "pue": pue, **overrides}
    for name, v in flags.items():
        if v is None:
            continue
        if name not in RANGES:
            raise UserError(name, f"not a cost-model value; expected one of {', '.join(RANGES)}")
        lo, hi = RANGES[name]
        if not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
            raise UserError(name.replace("_", "-"), f"expected a finite number in [{lo:g}, {hi:g}], got {v!r}")
        raw = _merge(raw, {name: {"value": float(v), "source": "user:--" + name.replace("_", "-"), "grade": "U",
                                  "note": ""}})
    try:
        return _validate(raw, where)
    except UserError as e:  # a tier the price file gave is named as the file's, not the cost model's
        if prices is not None and e.field.startswith("costs.price_ladder"):
            raise UserError("prices" + e.field.removeprefix("costs"), e.message) from None
        raise


@cache
def default_costs() -> CostModel:
    """The shipped cost model (catalog/costs.yaml)."""
    return load_costs()


def economics(power_w: float, units: float, system: str, tok_s_output_total: float, tok_s_input_total: float,
              tok_s_user: float, costs: CostModel | None = None) -> dict[str, Any]:
    """Cost and revenue of one replica (or pool) at an operating point.

    power_w: IT power of the hardware (its share of racks); units: racks or nodes it occupies (may be
    fractional); tok_s_output_total / tok_s_input_total: its output and prefilled input tokens/s;
    tok_s_user: the per-user speed, which sets the price tier. Returns plain JSON-able numbers; the cost
    fields are None when the cost model has no capex for `system` (the note says so).
    """
    return hardware_economics(power_w, {system: units}, tok_s_output_total, tok_s_input_total, tok_s_user, costs)


def hardware_economics(power_w: float, units: Mapping[str, float], tok_s_output_total: float,
                       tok_s_input_total: float, tok_s_user: float,
                       costs: CostModel | None = None) -> dict[str, Any]:
    """`economics` of hardware that spans systems (a heterogeneous fleet): `units` maps each system to the
    racks or nodes of it; capex is summed over them, energy is charged on the total `power_w`."""
    c = costs or default_costs()
    for name, v in (("power_w", power_w), ("tok_s_output_total", tok_s_output_total),
                    ("tok_s_input_total", tok_s_input_total), ("tok_s_user", tok_s_user),
                    *((f"units.{k}", n) for k, n in units.items())):
        if not math.isfinite(v) or v < 0:
            raise UserError(name, f"expected a finite non-negative number, got {v!r}")
    facility_w = power_w * c.pue.value
    out: dict[str, Any] = {
        "facility_kw": facility_w / 1e3,
        "tok_s_per_mw_facility": tok_s_output_total / (facility_w / 1e6) if facility_w > 0 else 0.0,
        "energy_usd_per_hour": facility_w / 1e3 * c.usd_per_kwh.value,
        "utilisation": c.utilisation.value,
        "capex_usd": None, "capex_usd_per_hour": None, "opex_usd_per_hour": None, "cost_usd_per_hour": None,
        "usd_per_mtok_output": None, "usd_per_mtok_input": None,
        "alloc_rule": alloc_rule(c), "alloc_usd_per_mtok_output": None, "alloc_usd_per_mtok_input": None,
        **revenue(units, tok_s_output_total, tok_s_input_total, tok_s_user, facility_w, c),
        "margin_usd_per_hour": None,
        "cost_notes": [],
    }
    caps = {get_system(s).name: (c.capex(s), n) for s, n in units.items()}
    missing = [s for s, (cap, _) in caps.items() if cap is None]
    if missing:
        out["cost_notes"] += [f"no capex for {s} in the cost model: give capex_usd.{s} with --costs" for s in missing]
        return out
    capex = sum(cap.value * n for cap, n in caps.values())
    capex_h = capex / (c.amortisation_years.value * HOURS_PER_YEAR)
    opex_h = capex * c.opex_fraction_per_year.value / HOURS_PER_YEAR
    cost_h = capex_h + opex_h + out["energy_usd_per_hour"]
    out.update(capex_usd=capex, capex_usd_per_hour=capex_h, opex_usd_per_hour=opex_h, cost_usd_per_hour=cost_h,
               **per_token_costs(cost_h, tok_s_output_total, tok_s_input_total, c))
    if out["revenue_usd_per_hour"] is not None:
        out["margin_usd_per_hour"] = out["revenue_usd_per_hour"] - cost_h
    out["cost_notes"] += [f"capex {s}: {cap.source} ({cap.grade})" for s, (cap, _) in caps.items()]
    return out


def alloc_rule(c: CostModel) -> str:
    """The allocation rule in words: how `alloc_usd_per_mtok_*` split one cost between input and output."""
    return (f"allocation rule (an assumption, not the headline): an input token weighs "
            f"{c.input_price_ratio.value:g} of an output token")


def per_token_costs(cost_usd_per_hour: float, tok_s_output: float, tok_s_input: float,
                    c: CostModel) -> dict[str, float | None]:
    """The whole hourly cost over output tokens (the headline) and over input tokens, at the model's
    utilisation, and the allocation rule's split of it."""
    u, ratio = c.utilisation.value, c.input_price_ratio.value

    def per_mtok(tok_s: float) -> float | None:
        return cost_usd_per_hour / (3600.0 * u * tok_s) * 1e6 if tok_s > 0 else None

    alloc_out = per_mtok(tok_s_output + ratio * tok_s_input)
    return {"usd_per_mtok_output": per_mtok(tok_s_output), "usd_per_mtok_input": per_mtok(tok_s_input),
            "alloc_usd_per_mtok_output": alloc_out,
            "alloc_usd_per_mtok_input": None if alloc_out is None else ratio * alloc_out}


def revenue(units: Mapping[str, float] | list[str], tok_s_output: float, tok_s_input: float, tok_s_user: float,
            facility_w: float, c: CostModel) -> dict[str, Any]:
    """Revenue per owned hour at the price source that applies (`CostModel.price_for`); every field None
    when none does: no price, no revenue."""
    tier = c.price_for(list(units), tok_s_user)
    if tier is None:
        return {"price_usd_per_mtok_output": None, "price_usd_per_mtok_input": None, "price_source": None,
                "revenue_usd_per_hour": None, "revenue_usd_per_hour_per_mw_facility": None}
    p_in = tier.usd_per_mtok_input or 0.0
    rev_h = 3600.0 * c.utilisation.value * (tok_s_output * tier.usd_per_mtok_output + tok_s_input * p_in) / 1e6
    return {
        "price_usd_per_mtok_output": tier.usd_per_mtok_output, "price_usd_per_mtok_input": tier.usd_per_mtok_input,
        "price_source": f"assumption: price {tier.source} ({tier.grade})",
        "revenue_usd_per_hour": rev_h,
        # per facility MW: the unit of NVIDIA's "up to 10x revenue opportunity" (per MW of a fixed hall)
        "revenue_usd_per_hour_per_mw_facility": rev_h / (facility_w / 1e6) if facility_w > 0 else 0.0,
    }


def cost_inputs(costs: CostModel | None = None) -> dict[str, Any]:
    """The scalar assumptions in force, with their provenance (for reports)."""
    c = costs or default_costs()
    return {name: {"value": getattr(c, name).value, "source": getattr(c, name).source,
                   "grade": getattr(c, name).grade} for name in RANGES}


def estimate_economics(e: Any, system: str, costs: CostModel | None = None) -> dict[str, Any]:
    """`economics` of a steady-state `Estimate` (`lpxsim.plan.estimate`) of one replica on `system`."""
    s = get_system(system)
    units = e.chips / s.chips_per_unit
    tok_in = max(0.0, e.total_tok_s - e.tok_s_total)
    return economics(e.power_w, units, s.name, e.tok_s_total, tok_in, e.tok_s_user, costs)


def point_economics(op: Any, costs: CostModel | None = None) -> dict[str, Any]:
    """`economics` of one replica at an `OperatingPoint` (`lpxsim.plan.operating_point`); {} if infeasible."""
    if not op.feasible:
        return {}
    prefilled = op.new_tokens or op.isl
    return economics(op.replica_power_w, op.replica_units, op.system, op.tok_s_total,
                     op.requests_per_s * prefilled, op.tok_s_user, costs)
