"""Error bands: how far an answer of each cost path has been from measurements (issue 28, item 8).

Every figure lpxsim gives comes from one of four paths, and each has its own validation record:

- ``measured-gpu``: a GPU whose kernels aiconfigurator-core measured, at a precision its tables cover
  (the calibration replay of `lpxsim validate`: InferenceX DeepSeek-R1 rows on H200 and B200);
- ``projected-gpu``: another GPU (another vendor, a newer part) or a precision the tables lack, priced from
  a measured sibling by achieved rates (`gpu.projection`); validated by replaying the calibration rows with each
  GPU projected from a sibling instead of its own tables;
- ``compiled-lpx``: a compiled LPU program (LPX, first-generation Groq), against the published figures;
- ``wafer-scale``: the Cerebras rule, against the published figures.

The errors are computed by `lpxsim validate` (`lpxsim.engine.validation`) and shipped in
``catalog/fitted/error_bands.json``; `lpxsim validate --write` regenerates that file, and a test checks the
shipped file equals what validate computes. The band shown with an answer is the 68th percentile of the
path's absolute errors (about one standard deviation of a normal error), or the largest error when fewer than
five points exist: too few for a quantile.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from lpxsim.core.errors import UserError

if TYPE_CHECKING:
    from lpxsim.specs.hardware import SystemSpec

PATHS = ("measured-gpu", "projected-gpu", "compiled-lpx", "wafer-scale")
METRICS = ("tok_s_user", "ttft", "tok_s_per_chip")
BAND_QUANTILE = 0.68  # the share of validation points a band covers (about one sigma of a normal error)
MIN_POINTS_FOR_QUANTILE = 5  # below this the band is the largest error seen


@dataclass(frozen=True)
class ErrorStats:
    """Summary of signed percent errors (prediction / measurement - 1)."""

    n: int
    median_abs_pct: float
    mape_pct: float
    median_signed_pct: float
    band_pct: float  # the +- shown with an answer

    def as_row(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ErrorBand:
    """The error band of one cost path and metric, and the data it came from."""

    path: str
    metric: str
    median_abs_pct: float
    mape_pct: float
    median_signed_pct: float
    band_fraction: float  # +- this fraction of the answer is shown
    n_points: int
    data: str  # what the errors were measured on
    layout: str = ""  # "attention-dp": the band of the path's rows with the answer's layout feature (`band_for`)

    def interval(self, value: float) -> tuple[float, float]:
        """(low, high) of `value` under this band: value / (1 + b) to value * (1 + b). An error is a ratio
        (prediction / measurement - 1), so the band is symmetric in the ratio: a path that has been 184 %
        high or low puts the truth within 2.84x either way, never below zero."""
        return band_interval(value, self.band_fraction)

    def as_dict(self) -> dict:
        """JSON-able fields (what an answer's `band` carries)."""
        return asdict(self)


def band_interval(value: float, fraction: float) -> tuple[float, float]:
    """(low, high) of `value` under a band of +- `fraction`: value / (1 + b) to value * (1 + b) (`ErrorBand.interval`;
    the charts' whiskers from a row's band percentage)."""
    return value / (1.0 + fraction), value * (1.0 + fraction)


def _round(x: float) -> float:
    return round(x, 2)


def error_stats(errors_pct: list[float]) -> ErrorStats:
    """Median absolute error, MAPE, median signed error and the band of a list of signed % errors."""
    errs = [e for e in errors_pct if e is not None and math.isfinite(e)]
    if not errs:
        return ErrorStats(0, math.nan, math.nan, math.nan, math.nan)
    a = sorted(abs(e) for e in errs)
    if len(a) < MIN_POINTS_FOR_QUANTILE:
        band = a[-1]
    else:  # linear interpolation between order statistics
        pos = BAND_QUANTILE * (len(a) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(a) - 1)
        band = a[lo] + (a[hi] - a[lo]) * (pos - lo)
    return ErrorStats(len(a), _round(statistics.median(a)), _round(statistics.fmean(a)),
                      _round(statistics.median(errs)), _round(band))


def shipped_path() -> Path:
    """The packaged error-band file (written by `lpxsim validate --write`)."""
    return Path(str(resources.files("lpxsim").joinpath("catalog", "fitted", "error_bands.json")))


@cache
def _shipped() -> dict:
    p = shipped_path()
    return json.loads(p.read_text()) if p.is_file() else {}


ATTENTION_DP = "attention-dp"  # the layout feature with a record of its own (`layout_feature`)


def layout_feature(layout: str) -> str:
    """The layout feature of a GPU deployment label that has an error record of its own ("attention-dp" for a
    layout running attention data-parallel: 'TP8/EP8/DPattn', `gpu.layout.Layout.label`), else ''."""
    return ATTENTION_DP if "DPattn" in (layout or "") else ""


def layout_record(feature: str) -> dict:
    """The shipped error record of a layout feature (`engine.validation.layout_bands`), {} without one."""
    return _shipped().get("layouts", {}).get(feature, {}) if feature else {}


def band_for(path: str, metric: str = "tok_s_user", layout: str = "", system: str = "",
             spec: bool = False) -> ErrorBand:
    """The error band of `path` (one of PATHS) for `metric` (tok_s_user, ttft, tok_s_per_chip).

    `layout`: the answer's deployment layout label. Where it runs attention data-parallel and the calibration
    rows that do have a record on this path, the band is theirs (their error statistics), never narrower than
    the path's: those rows have run one way (docs/validation.md "Attention data-parallel"), which the path's
    band over all rows hides.

    `system`: the answer's catalog system. A GPU projected from another maker's tables (AMD from NVIDIA's) shows a
    band no narrower than its maker's cross-vendor record of that metric (`vendor_record`: lpxsim's error on the
    public serving points of that maker's GPUs; throughput from their TPOT, TTFT where they give one), which the
    NVIDIA-to-NVIDIA projection band does not measure. A system outside the calibration set with at least
    MIN_POINTS_FOR_QUANTILE public serving points of its own (`system_record`: B300 in InferenceX's pull-request
    baselines) shows a band no narrower than its record on them: the calibration replay never ran that system.

    `spec`: the answer drafts (MTP). On a GPU path its band is no narrower than the record of every drafting judge
    point (`speculative_record`), which the calibration replay, with no drafting row, does not measure.

    Raises UserError naming `path` or `metric` when there is no such path or no validation of that metric.
    """
    if path not in PATHS:
        raise UserError("path", f"unknown cost path {path!r}; choose one of {', '.join(PATHS)}")
    entry = _shipped().get("bands", {}).get(path, {})
    m = entry.get("metrics", {}).get(metric)
    if m is None:
        have = ", ".join(entry.get("metrics", {})) or "none"
        raise UserError("metric", f"no validation of {metric!r} on the {path} path (validated: {have})")
    feature = layout_feature(layout)
    record = layout_record(feature)
    own = record.get("paths", {}).get(path, {}).get("metrics", {}).get(metric)
    if own is None or own["n"] < MIN_POINTS_FOR_QUANTILE:
        own, feature, data = m, "", entry["data"]
    else:
        data = record["data"]
    band_pct = max(own["band_pct"], m["band_pct"])
    judged = _cross_vendor_record(system, metric) if path == "projected-gpu" else {}
    if judged and judged["band_pct"] > band_pct:
        band_pct = judged["band_pct"]
        data += f"; widened to its maker's cross-vendor record ({judged['n']} public serving points)"
    own_judges = _quantile_record(system_record(system), metric) if path in GPU_PATHS else {}
    if own_judges and own_judges["band_pct"] > band_pct:
        band_pct = own_judges["band_pct"]
        data += f"; widened to this system's record on its own {own_judges['n']} public serving points"
    drafted = _quantile_record(speculative_record(), metric) if spec and path in GPU_PATHS else {}
    if drafted and drafted["band_pct"] > band_pct:
        band_pct = drafted["band_pct"]
        data += f"; widened to the speculative-decoding record ({drafted['n']} drafting judge points)"
    return ErrorBand(path=path, metric=metric, median_abs_pct=own["median_abs_pct"], mape_pct=own["mape_pct"],
                     median_signed_pct=own["median_signed_pct"], band_fraction=round(band_pct / 100.0, 4),
                     n_points=own["n"], data=data, layout=feature)


# the vendor-record metric that speaks for each answer metric: a judge's TPOT error is tok/s/user's and, at its
# stated concurrency, tok/s/chip's
JUDGED_AS = {"tok_s_user": "tok_s_user", "tok_s_per_chip": "tok_s_user", "ttft": "ttft"}


GPU_PATHS = ("measured-gpu", "projected-gpu")


def system_record(system: str) -> dict:
    """The shipped record of `system` on its own public serving points (`engine.validation.system_records`: a
    system outside the calibration set), {} without one."""
    return _shipped().get("systems", {}).get(system, {}) if system else {}


def _quantile_record(record: dict, metric: str) -> dict:
    """The judge record (`record`: a system's or the drafting judges') of the judge metric that speaks for answer
    `metric` (JUDGED_AS), where it has enough points for a quantile band (MIN_POINTS_FOR_QUANTILE; a system with
    fewer speaks through its maker's cross-vendor record, where there is one), else {}."""
    rec = record.get("metrics", {}).get(JUDGED_AS.get(metric, ""), {})
    return rec if rec.get("n", 0) >= MIN_POINTS_FOR_QUANTILE else {}


def speculative_record() -> dict:
    """The shipped record of every drafting judge point (`engine.validation.speculative_record`), {} without one."""
    return _shipped().get("speculative", {})


def _speculative_caveat() -> str:
    """How far lpxsim has been from the drafting judge points, '' without a record."""
    metrics = speculative_record().get("metrics", {})
    parts = [f"{what} {_signed_words(r['min_signed_pct'], r['max_signed_pct'])} on {r['n']}"
             for what, r in (("tok/s/user", metrics.get("tok_s_user")), ("TTFT", metrics.get("ttft"))) if r]
    return ("speculative decoding: lpxsim's " + " and ".join(parts) + " drafting judge points (no calibration row "
            "drafts)") if parts else ""


def _cross_vendor_record(system: str, metric: str = "tok_s_user") -> dict:
    """The cross-vendor record of `metric` for `system`'s maker where its GPUs are projected from another maker's
    tables, else {} (also for no system, a maker the validation measures, or a metric no judge gives)."""
    if not system or metric not in JUDGED_AS:
        return {}
    vendor = unvalidated_vendor(system)
    if not vendor:
        return {}
    return vendor_record(vendor).get("metrics", {}).get(JUDGED_AS[metric], {})


def path_for(system: str, weights: str = "fp8", framework: str = "sglang") -> str:
    """The cost path an answer for (system, weights precision, framework) comes from.

    LPU systems are ``compiled-lpx``, wafer-scale ones ``wafer-scale``. A GPU is ``measured-gpu`` when
    aiconfigurator-core measured it (`gpu.measured.AIC_SYSTEM`) and its tables for `framework` time a GEMM in
    that weight format; otherwise ``projected-gpu`` (from a sibling's tables, or the roofline where no tables
    are installed: neither is a measurement of this GPU at this precision).
    """
    from lpxsim.catalog import get_system

    s = get_system(system)
    if s.is_lpu:
        return "compiled-lpx"
    if s.is_wafer:
        return "wafer-scale"
    return "measured-gpu" if _gpu_measured(s.name, weights, framework) else "projected-gpu"


@cache
def _gpu_measured(system: str, weights: str, framework: str) -> bool:
    """Whether aiconfigurator-core's tables time this GPU's GEMM in `weights` under `framework`. Remembered in
    the cache folder (keyed by the GPU model's sources and the installed tables' location): a warm answer
    must not import numpy and the tables to name its path."""
    from importlib.util import find_spec

    from lpxsim.core.cache import digest, read_memo, source_version, write_memo

    spec = find_spec("aiconfigurator_core")
    where = ",".join(spec.submodule_search_locations or []) if spec is not None else ""
    sig = digest(source_version("lpxsim.gpu"), where, _installed_version(), system, weights, framework)
    text = read_memo("cost-path", sig)
    if text in ("0", "1"):
        return text == "1"
    measured = _gpu_tables_time(system, weights, framework)
    write_memo("cost-path", sig, "1" if measured else "0")
    return measured


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aiconfigurator-core")
    except PackageNotFoundError:
        return ""


def _gpu_tables_time(system: str, weights: str, framework: str) -> bool:
    from lpxsim.gpu.engine import framework_name
    from lpxsim.gpu.measured import AIC_SYSTEM, data_root, measured_ops
    from lpxsim.specs.precision import get_precision

    if system not in AIC_SYSTEM or data_root() is None:
        return False
    fmt = get_precision(weights, "weights").name
    # a DeepSeek-sized decode GEMM: every measured table covers this shape where it covers the format
    return measured_ops(AIC_SYSTEM[system], framework_name(framework)).gemm(8, 7168, 2048, fmt) is not None


@cache
def validated_vendors() -> tuple[str, ...]:
    """The chip makers whose GPUs the GPU paths' validation replays (the calibration set's GPUs and the
    siblings the projected replay prices them from: `engine.validation.PROJECT_FROM`)."""
    from lpxsim.catalog import get_system
    from lpxsim.engine.validation import PROJECT_FROM

    return tuple(sorted({get_system(n).vendor for pair in PROJECT_FROM.items() for n in pair} - {""}))


def unvalidated_vendor(system: str | SystemSpec) -> str:
    """The maker of `system` where the GPU paths' validation does not replay its GPUs (they are projected from
    another maker's tables: AMD), else '' (a validated maker, or none named)."""
    from lpxsim.catalog import get_system

    vendor = get_system(system).vendor
    return vendor if vendor and vendor not in validated_vendors() else ""


def band_caveat(system: str, path: str) -> str:
    """What a band does not cover for `system`: a GPU projected from another maker's tables carries a band
    measured between one maker's GPUs only, and says how far its maker's public serving points (judges) have
    been from lpxsim; a system outside the calibration set says how far its own have been (`_system_caveat`);
    '' where the validation speaks for it."""
    from lpxsim.catalog import get_system

    if path not in GPU_PATHS:
        return ""
    spec = get_system(system)
    vendor = unvalidated_vendor(spec) if path == "projected-gpu" else ""
    if not vendor:
        return _system_caveat(system)
    known = validated_vendors()
    offline = (f"; {vendor}'s own MLPerf Offline runs are among its judges"
               if vendor in offline_judged_vendors() else "")
    return (f"cross-vendor: the band is from projections between {'/'.join(known)} GPUs; "
            f"{_vendor_judged(vendor, spec.chip.name)}{offline}")


def _system_caveat(system: str) -> str:
    """How far lpxsim has been from `system`'s own public serving points (judges, not fitted), where it has a
    record (`system_record`), else ''."""
    metrics = system_record(system).get("metrics", {})
    parts = [f"{what} {_signed_words(r['min_signed_pct'], r['max_signed_pct'])} "
             f"(median {r['median_signed_pct']:+.0f}%)"
             for what, r in (("tok/s/user", metrics.get("tok_s_user")), ("TTFT", metrics.get("ttft"))) if r]
    if not parts:
        return ""
    n = metrics.get("tok_s_user", metrics.get("ttft", {})).get("n", 0)
    return f"outside the calibration set: lpxsim's {' and '.join(parts)} on its {n} public serving points (judges, " \
           "not fitted)"


def vendor_record(vendor: str) -> dict:
    """The shipped cross-vendor record of a GPU maker (`engine.validation.vendor_records`), {} without one."""
    return _shipped().get("vendors", {}).get(vendor, {})


def _vendor_judged(vendor: str, gpu: str) -> str:
    """How far lpxsim's tok/s/user has been from the public serving points of `vendor`'s GPUs (judges, not fitted),
    and from `gpu`'s own where it has some."""
    metrics = vendor_record(vendor).get("metrics", {})
    rec = metrics.get("tok_s_user")
    if not rec:
        return f"no {vendor} serving measurement is in the validation set"

    def said(r: dict) -> str:
        return f"{_signed_words(r['min_signed_pct'], r['max_signed_pct'])} (median {r['median_signed_pct']:+.0f}%)"

    text = f"lpxsim's tok/s/user was {said(rec)} on {rec['n']} public {vendor} serving points (judges, not fitted)"
    own = rec.get("gpus", {}).get(gpu)
    text += f", {said(own)} on {gpu}'s {own['n']}" if own else ""
    ttft = metrics.get("ttft")
    return text + (f"; its TTFT {said(ttft)} on the {ttft['n']} that give one" if ttft else "")


@cache
def offline_judged_vendors() -> frozenset[str]:
    """The chip makers whose GPUs have published MLPerf Offline runs among `lpxsim validate`'s judges."""
    from lpxsim.catalog import get_system
    from lpxsim.engine.validation import mlperf_points

    return frozenset(get_system(p["system"]).vendor for p in mlperf_points()) - {""}


def _signed_words(lo: float, hi: float) -> str:
    """'11% high', '26-42% high', '3% low' or '-5 to +4%' for a range of signed percent errors."""
    if lo > 0 or hi < 0:
        a, b = sorted((abs(lo), abs(hi)))
        return f"{a:.0f}% {'high' if lo > 0 else 'low'}" if round(a) == round(b) else \
            f"{a:.0f}-{b:.0f}% {'high' if lo > 0 else 'low'}"
    return f"{lo:+.0f} to {hi:+.0f}%"


def layout_caveat(band: ErrorBand) -> str:
    """What a layout-feature band says beside its width: how far lpxsim has been off on the calibration rows with
    that feature (the median signed error of the band's metric) and, for attention-DP, on the saturated runs
    that use it (MLPerf Offline, trtllm-bench; '' for a band of the whole path)."""
    if not band.layout:
        return ""
    what = {"tok_s_user": "tok/s/user", "ttft": "TTFT", "tok_s_per_chip": "tok/s/chip"}.get(band.metric, band.metric)
    name = "attention-DP" if band.layout == ATTENTION_DP else band.layout
    s = band.median_signed_pct
    text = f"{name}: lpxsim's {what} {_signed_words(s, s)} on its {band.n_points} calibration rows (median)"
    off = layout_record(band.layout).get("offline")
    if off:
        text += (f", its saturated throughput {_signed_words(off['min_signed_pct'], off['max_signed_pct'])} on its "
                 f"{off['n']} saturated runs (MLPerf Offline, trtllm-bench)")
    return text


def band_text(system: str, path: str, band: ErrorBand, spec: bool = False) -> str:
    """How an answer names its band: '±11% (projected-gpu, 492 points)', with `band_caveat` and `layout_caveat`
    where they apply, and for an answer that drafts on a GPU (`spec`) the drafting judges' record."""
    drafting = _speculative_caveat() if spec and path in GPU_PATHS else ""
    caveats = "".join(f"; {c}" for c in (layout_caveat(band), band_caveat(system, path), drafting) if c)
    return f"±{100 * band.band_fraction:.0f}% ({path}, {band.n_points} points{caveats})"


def answer_band(system: str, weights: str = "fp8", framework: str = "sglang",
                metric: str = "tok_s_user", layout: str = "", spec: bool = False) -> ErrorBand:
    """The band of an answer for (system, weights, framework) on a deployment laid out as `layout`, drafting or
    not (`spec`): `band_for(path_for(...), metric, layout, system, spec)`."""
    return band_for(path_for(system, weights, framework), metric, layout, system, spec)


def figure_bands(system: str, path: str, layout: str, figures: dict[str, float | None], spec: bool = False) -> dict:
    """The band keys of an answer on `system` priced by `path` and laid out as `layout`, for `figures` (metric ->
    the answer's value, None where it has none): cost_path, band (`band_text` of tok/s/user), and per metric its
    ``{metric}_band_pct`` and the interval ``{metric}_low``/``{metric}_high`` it puts around the value. A metric the
    path has no validation of has no keys; `unvalidated` names it (comma-separated: a table row's value, parquet-safe),
    so an answer says so instead of going quiet. `spec`: the answer drafts (`band_for`)."""
    out: dict = {"cost_path": path}
    missing = []
    for metric, value in figures.items():
        try:
            b = band_for(path, metric, layout, system, spec)
        except UserError:  # no validation of this metric on this path
            missing.append(metric)
            continue
        out[f"{metric}_band_pct"] = round(100 * b.band_fraction, 2)  # two decimals: shown whole, it reads as `band_text`
        if value is not None and value > 0:
            out[f"{metric}_low"], out[f"{metric}_high"] = b.interval(value)
        if metric == "tok_s_user":
            out["band"] = band_text(system, path, b, spec)
    out["unvalidated"] = ",".join(missing)
    return out


def band_cell(pct: float | None) -> str:
    """'±205%': a band percentage (`figure_bands`' ``{metric}_band_pct``) for a table cell, '-' where there is none."""
    return f"±{pct:.0f}%" if pct is not None and pct == pct else "-"


def mixed_bands(parts: list[tuple[str, str]], figures: dict[str, float | None], spec: bool = False) -> dict:
    """The band keys (as `figure_bands` gives them) of a figure served by a deployment mixing cost paths
    (`parts`: (system, path) of each pool, e.g. Rubin prefill and LPX decode): per metric the widest of its parts'
    bands, and a metric any part has no validation of is unvalidated. No measurement of a mixed deployment
    exists, so its figure is no more certain than its least certain part; `band` names every part."""
    each = [figure_bands(system, path, "", figures, spec) for system, path in dict.fromkeys(parts)]
    if len(each) == 1:
        return each[0]
    out: dict = {"cost_path": " + ".join(d["cost_path"] for d in each)}
    missing = {m for d in each for m in d["unvalidated"].split(",") if m}
    widest = None
    for metric in figures:
        if metric in missing:
            continue
        top = max(each, key=lambda d, m=metric: d[f"{m}_band_pct"])
        out[f"{metric}_band_pct"] = top[f"{metric}_band_pct"]
        for end in ("low", "high"):
            if f"{metric}_{end}" in top:
                out[f"{metric}_{end}"] = top[f"{metric}_{end}"]
        if metric == "tok_s_user":
            widest = top
    if widest is not None:  # the widest part's own text ('±205% (compiled-lpx, 5 points)'), the others named in it
        others = ", ".join(f"{d['cost_path']} on {system} ±{d['tok_s_user_band_pct']:.0f}%"
                           for (system, _), d in zip(dict.fromkeys(parts), each, strict=True) if d is not widest)
        out["band"] = (f"{widest['band'][:-1]}; the widest part of a mixed deployment, of which no measurement "
                       f"exists; its other parts: {others})")
    out["unvalidated"] = ",".join(m for m in figures if m in missing)
    return out
