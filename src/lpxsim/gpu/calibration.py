"""Calibration of the GPU cost model on measured serving points (InferenceX, DeepSeek-R1-0528).

Each measured configuration (hardware, framework, precision, TP/EP/DP-attention,
ISL/OSL, concurrency) becomes a GpuStepModel and a closed-loop steady-state
estimate (`lpxsim.engine.steady_state.steady_state`). The fit minimises the log error
of TPOT, of total (input + output) tok/s per GPU and of TTFT at concurrency <= 8 with
scipy.optimize.least_squares over the few shared parameters of
`GpuParams` (FITTED_NAMES), within physical bounds.

Data handling (docs/assumptions.md, "GPU cost model"):
- InferenceX draws request lengths uniformly in [0.8, 1] x nominal, so the mean
  is 0.9 x nominal. The data confirm it: (e2el - ttft) / tpot + 1 gives a mean
  output length of 0.90 x OSL on every ISL/OSL pair.
- A configuration measured on several software images is fitted at its latest: the runs of its latest date,
  merged by their median (`load_points`). The engines get faster release by release (under a fit to every date,
  the 2026-05 runs of B200 and H200 come out 0-14 % faster than predicted, by engine and precision), and a planner
  answers for the engine a user deploys now; the replay tables still compare every dated run.
- The engines' per-step host time is then fitted once more per release, a release being the month of a run
  (`fit_releases` on `load_dated_points`: every configuration's runs of that month, the shared parameters held):
  SGLang's falls from 3.1 ms (2025-11) to 1.3 ms (2026-05). An answer prices the latest release; a replayed row
  the release of its date (`gpu.engine.engine_params`; assumption "engine-release").
- Throughput of rows flagged `flag_intvty_vs_n_gpus_gt15pct` is not used (a
  benchmark artefact per the data's README); their latencies are.
- KV cache format (`kv_format`): what InferenceX launches. TensorRT-LLM's DeepSeek recipes use an
  fp8 KV cache; SGLang on Blackwell is started with `--kv-cache-dtype fp8_e4m3` (dsr1_fp8_b200.sh,
  dsr1_fp4_b200.sh), on Hopper with the default (bf16; dsr1_fp8_h200.sh sets none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from lpxsim.core.benchmark_client import LENGTH_RATIO
from lpxsim.gpu.engine import POOLED, EngineParams, engine_params
from lpxsim.gpu.params import BOUNDS, FITTED_NAMES, GpuParams
from lpxsim.gpu.step import GpuStepModel

DATA_FILE = "inferencex_dsr1_calibration.csv"
SYSTEMS = {"H200": "h200-hgx", "B200": "b200-hgx"}
KV_FORMAT = {"sglang": "bf16", "trt": "fp8"}  # the engines' defaults; `kv_format` adds the launch settings
BLACKWELL = ("B200", "B300")  # the HGX scripts (IX-SGL, IX-SGL-B300); NVL72 runs use other recipes
# SGLang launches that pass --kv-cache-dtype fp8_e4m3: HGX Blackwell and the MI300X / MI325X scripts (IX-AMD-SGL)
SGLANG_FP8_KV = (*BLACKWELL, "MI300X", "MI325X")


def kv_format(hardware: str, framework: str) -> str:
    """The KV-cache format of an InferenceX DeepSeek-R1 run: fp8 under TensorRT-LLM, and under SGLang where
    its launch scripts pass --kv-cache-dtype fp8_e4m3 (HGX B200 / B300, MI300X, MI325X); otherwise the
    engine's default."""
    fw = {"trtllm": "trt"}.get(framework, framework)
    if fw == "sglang" and hardware.upper() in SGLANG_FP8_KV:
        return "fp8"
    return KV_FORMAT.get(fw, "bf16")
FRAMEWORK = {"sglang": "sglang", "trt": "trtllm", "vllm": "vllm"}
# TTFT enters the fit only at low concurrency: above it the measured TTFT is mostly queueing behind
# other users' prefills, which the mean-field steady state does not model.
TTFT_FIT_MAX_CONC = 8
CONFIG_KEYS = ["hardware", "framework", "precision", "tp", "ep", "dp_attention", "isl", "osl", "conc"]


def data_path() -> Path:
    """The packaged copy of the calibration CSV."""
    return Path(str(resources.files("lpxsim").joinpath("data", "measured", DATA_FILE)))


def _runs(path: str | Path | None) -> pd.DataFrame:
    """The calibration runs, attention-DP as a boolean."""
    d = pd.read_csv(path or data_path())
    d["dp_attention"] = d["dp_attention"].astype(str).str.lower().isin(("true", "1"))
    return d


def _medians(d: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per group of `keys`: median TPOT/TTFT over its runs, median tok/s/GPU over its unflagged runs."""
    ok = d["flag_intvty_vs_n_gpus_gt15pct"].fillna(0).astype(int) == 0
    lat = d.groupby(keys).agg(
        runs=("tpot_median_s", "size"), tpot_s=("tpot_median_s", "median"), ttft_s=("ttft_median_s", "median")
    )
    tput = d[ok].groupby(keys).agg(
        total_tok_s_per_gpu=("tput_per_gpu", "median"), output_tok_s_per_gpu=("output_tput_per_gpu", "median")
    )
    return lat.join(tput, how="left").reset_index().sort_values(keys).reset_index(drop=True)


def load_points(path: str | Path | None = None) -> pd.DataFrame:
    """One row per measured configuration at its latest software date: median TPOT/TTFT over that date's runs,
    median tok/s/GPU over its unflagged runs."""
    d = _runs(path)
    return _medians(d[d["date"] == d.groupby(CONFIG_KEYS)["date"].transform("max")], CONFIG_KEYS)


def load_dated_points(path: str | Path | None = None) -> pd.DataFrame:
    """One row per measured configuration and release (the month of its runs, column `release`): the medians of
    that month's runs, as `load_points` takes them at a configuration's latest date."""
    d = _runs(path)
    d["release"] = d["date"].astype(str).str[:7]
    return _medians(d, [*CONFIG_KEYS, "release"])


@dataclass
class PointModel:
    """A measured configuration with its step model (features cached across parameter updates)."""

    row: dict
    step: GpuStepModel

    def predict(self, params: GpuParams | None = None, engine=None) -> dict[str, float]:
        from lpxsim.engine.steady_state import steady_state

        if params is not None and params != self.step.params:
            self.step.params = params
            self.step._priced.clear()
            self.step._cache_base = None
        if engine is not None:
            self.step.engine = engine
        r = self.row
        isl = round(LENGTH_RATIO * r["isl"])
        osl = round(LENGTH_RATIO * r["osl"])
        est = steady_state(self.step, isl, osl, int(r["conc"]), prefill_chunk=self.step.prefill_chunk)
        return {
            "tpot_s": est.tpot_s,
            "ttft_s": est.ttft_s,
            "total_tok_s_per_gpu": est.total_tok_s_per_chip,
            "output_tok_s_per_gpu": est.output_tok_s_per_chip,
        }


def point_models(points: pd.DataFrame, model: str = "deepseek-r1") -> tuple[list[PointModel], list[dict]]:
    """Step models for every calibration configuration, and the configurations the model says do not fit. Each
    carries the engine's pooled fit (the fit stages set the engine they try)."""
    from lpxsim.core.errors import UserError

    out, rejected = [], []
    for r in points.to_dict("records"):
        step = GpuStepModel(
            model, SYSTEMS[r["hardware"]], tp=int(r["tp"]), ep=int(r["ep"]), dp_attention=bool(r["dp_attention"]),
            weights=r["precision"], kv=kv_format(r["hardware"], r["framework"]),
            framework=FRAMEWORK.get(r["framework"], r["framework"]), release=POOLED,
        )
        pm = PointModel(r, step)
        try:
            pm.predict(step.params)
        except UserError as e:  # KV of all streams does not fit: the engine would have queued them
            rejected.append(r | {"reason": str(e)})
            continue
        out.append(pm)
    return out, rejected


def predict(pms: list[PointModel], params: GpuParams | None = None,
            engines: dict[str, dict[str, float]] | None = None) -> pd.DataFrame:
    """Measured and predicted TPOT and tok/s per GPU with percentage errors, one row per configuration.
    `engines` ({framework: fitted values}, as fit_engines returns) overrides the shipped engine fit."""

    rows = []
    for pm in pms:
        eng = None
        if engines is not None and pm.step.framework in engines:
            eng = engine_params(pm.step.framework, POOLED).with_values(**engines[pm.step.framework])
        p = pm.predict(params, eng)
        row = dict(pm.row)
        for k, v in p.items():
            row[f"pred_{k}"] = v
        rows.append(row)
    df = pd.DataFrame(rows)
    for k in ("tpot_s", "ttft_s", "total_tok_s_per_gpu", "output_tok_s_per_gpu"):
        df[f"err_{k}_pct"] = 100.0 * (df[f"pred_{k}"] / df[k] - 1.0)
    return df


def _residuals(x: np.ndarray, pms: list[PointModel], base: GpuParams) -> np.ndarray:
    params = replace(base, **dict(zip(FITTED_NAMES, (float(v) for v in x), strict=True)))
    res = []
    for pm in pms:
        p = pm.predict(params)
        res.append(math.log(p["tpot_s"] / pm.row["tpot_s"]))
        meas = pm.row.get("total_tok_s_per_gpu")
        res.append(math.log(p["total_tok_s_per_gpu"] / meas) if meas == meas and meas else 0.0)
        ttft_ok = pm.row["conc"] <= TTFT_FIT_MAX_CONC
        res.append(math.log(p["ttft_s"] / pm.row["ttft_s"]) if ttft_ok else 0.0)
    return np.asarray(res)


def fit(pms: list[PointModel], base: GpuParams | None = None) -> GpuParams:
    """Least-squares fit of FITTED_NAMES on log errors of TPOT, total tok/s per GPU and low-concurrency TTFT."""
    from scipy.optimize import least_squares

    base = base or GpuParams()
    x0 = np.array([getattr(base, n) for n in FITTED_NAMES])
    lo = np.array([BOUNDS[n][0] for n in FITTED_NAMES])
    hi = np.array([BOUNDS[n][1] for n in FITTED_NAMES])
    scale = np.maximum(np.abs(x0), 1e-6)
    sol = least_squares(_residuals, np.clip(x0, lo, hi), bounds=(lo, hi), x_scale=scale, args=(pms, base),
                        method="trf", max_nfev=200)
    return replace(base, **dict(zip(FITTED_NAMES, (float(v) for v in sol.x), strict=True)))


def fit_engines(pms: list[PointModel]) -> tuple[dict[str, dict[str, float]], GpuParams]:
    """Fit of each framework's two engine overheads (engine.FITTED) and of two shared, framework- and
    GPU-independent parameters, in two least-squares stages on log errors:

    1. the first-token stage: the host's per-kernel dispatch time of an eager prefill pass
       (`eager_dispatch_s`, `GpuStepModel.prefill_dispatch_s`) and each framework's first-token host time,
       on TTFT at concurrency <= TTFT_FIT_MAX_CONC;
    2. the engine stage (as before the first stage existed): the per-kernel overhead of the few ops no
       measured table covers (norms, RoPE, activations, router) and each framework's per-step and
       first-token host times, on TPOT, total tok/s per GPU and low-concurrency TTFT over all points,
       with the dispatch time of stage 1 held.

    The dispatch time is a first-token parameter: decode runs under CUDA graphs and does not see it,
    so stage 2 keeps the decode fit it had without it. Returns ({framework: values}, params)."""

    fws = sorted({pm.step.framework for pm in pms})
    engs = {fw: engine_params(fw, POOLED) for fw in fws}
    params = pms[0].step.params
    params, engs = _fit_stage(pms, params, engs, ("eager_dispatch_s",), ("first_token_overhead_s",), ttft_only=True)
    params, engs = _fit_stage(pms, params, engs, ("kernel_overhead_s",), ("step_overhead_s", "first_token_overhead_s"),
                              ttft_only=False)
    for pm in pms:
        pm.predict(params, engs[pm.step.framework])
    return {fw: {k: getattr(e, k) for k in ("step_overhead_s", "first_token_overhead_s")} for fw, e in engs.items()}, params


ENGINE_BOUNDS = {"step_overhead_s": (0.0, 20e-3), "first_token_overhead_s": (0.0, 1.0)}
SCALE = {"kernel_overhead_s": 1e-6, "eager_dispatch_s": 10e-6, "step_overhead_s": 1e-3, "first_token_overhead_s": 0.05}


def _fit_stage(pms: list[PointModel], base: GpuParams, engs: dict, shared: tuple[str, ...], per_engine: tuple[str, ...],
               ttft_only: bool) -> tuple[GpuParams, dict]:
    """One least-squares stage over `shared` GpuParams and each framework's `per_engine` values, started from
    the given values (the shipped fit, or the priors where none ships: the loss is flat along the trade between
    per-kernel and per-step overheads, docs/assumptions.md, and a cold start stops elsewhere on it).
    Residuals: log errors of low-concurrency TTFT (`ttft_only`), or of TPOT, total tok/s per GPU and
    low-concurrency TTFT."""
    from scipy.optimize import least_squares

    fws = sorted(engs)
    ns, ne = len(shared), len(per_engine)

    def unpack(x: np.ndarray) -> tuple[GpuParams, dict]:
        params = replace(base, **{k: float(v) for k, v in zip(shared, x[:ns], strict=True)})
        out = {fw: engs[fw].with_values(**{k: float(v) for k, v in zip(per_engine, x[ns + ne * i: ns + ne * (i + 1)],
                                                                            strict=True)})
               for i, fw in enumerate(fws)}
        return params, out

    used = [pm for pm in pms if not ttft_only or pm.row["conc"] <= TTFT_FIT_MAX_CONC]

    def res(x: np.ndarray) -> np.ndarray:
        params, e = unpack(x)
        r = []
        for pm in used:
            p = pm.predict(params, e[pm.step.framework])
            ok = pm.row["conc"] <= TTFT_FIT_MAX_CONC
            r.append(math.log(p["ttft_s"] / pm.row["ttft_s"]) if ok else 0.0)
            if ttft_only:
                continue
            r.append(math.log(p["tpot_s"] / pm.row["tpot_s"]))
            meas = pm.row.get("total_tok_s_per_gpu")
            r.append(math.log(p["total_tok_s_per_gpu"] / meas) if meas == meas and meas else 0.0)
        return np.asarray(r)

    bounds = [BOUNDS[k] for k in shared] + [ENGINE_BOUNDS[k] for _ in fws for k in per_engine]
    lo, hi = np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])
    x0 = np.clip(np.array([getattr(base, k) for k in shared] + [getattr(engs[fw], k) for fw in fws
                                                                 for k in per_engine]), lo, hi)
    scale = np.array([SCALE[k] for k in shared] + [SCALE[k] for _ in fws for k in per_engine])
    sol = least_squares(res, x0, bounds=(lo, hi), x_scale=scale, method="trf", max_nfev=40, diff_step=0.05)
    return unpack(sol.x)


# a month with fewer configurations measured is not fitted as a release of its own: its rows take the one before
MIN_RELEASE_POINTS = 5


def fit_releases(pms: list[PointModel], params: GpuParams,
                 engines: dict[str, dict[str, float]]) -> dict[str, dict[str, dict[str, float]]]:
    """Each framework's per-step host time per release ({framework: {month: {"step_overhead_s": s}}}): one
    least-squares fit per release on the log errors of TPOT and total tok/s per GPU of the points of that
    release (`load_dated_points`), with the shared `params` and the framework's other fitted values (`engines`,
    as `fit_engines` returns them) held. A month with fewer than MIN_RELEASE_POINTS points is left out."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for fw in sorted({pm.step.framework for pm in pms}):
        base = engine_params(fw, POOLED).with_values(**engines.get(fw, {}))
        for month in sorted({str(pm.row["release"]) for pm in pms if pm.step.framework == fw}):
            used = [pm for pm in pms if pm.step.framework == fw and str(pm.row["release"]) == month]
            if len(used) >= MIN_RELEASE_POINTS:
                out.setdefault(fw, {})[month] = {"step_overhead_s": _fit_step_overhead(used, params, base)}
    return out


def _fit_step_overhead(used: list[PointModel], params: GpuParams, base: EngineParams) -> float:
    """The per-step host time that best fits `used` (log errors of TPOT and total tok/s per GPU), the rest of
    the engine `base` and the shared `params` held."""
    from scipy.optimize import least_squares

    def res(x: np.ndarray) -> np.ndarray:
        e = base.with_values(step_overhead_s=float(x[0]))
        r = []
        for pm in used:
            p = pm.predict(params, e)
            r.append(math.log(p["tpot_s"] / pm.row["tpot_s"]))
            meas = pm.row.get("total_tok_s_per_gpu")
            r.append(math.log(p["total_tok_s_per_gpu"] / meas) if meas == meas and meas else 0.0)
        return np.asarray(r)

    lo, hi = ENGINE_BOUNDS["step_overhead_s"]
    sol = least_squares(res, [min(max(base.step_overhead_s, lo), hi)], bounds=([lo], [hi]),
                        x_scale=[SCALE["step_overhead_s"]], method="trf", max_nfev=40, diff_step=0.05)
    return float(sol.x[0])


FIT_SHARED = ("kernel_overhead_s", "eager_dispatch_s")  # GpuParams fit_engines fits for every GPU and framework


def summary(df: pd.DataFrame) -> dict[str, float]:
    """Median absolute % errors of TPOT, total and output tok/s per GPU."""
    return {
        "points": int(len(df)),
        "tpot_mdape_pct": float(df["err_tpot_s_pct"].abs().median()),
        "total_tok_s_per_gpu_mdape_pct": float(df["err_total_tok_s_per_gpu_pct"].abs().median()),
        "output_tok_s_per_gpu_mdape_pct": float(df["err_output_tok_s_per_gpu_pct"].abs().median()),
        "ttft_mdape_pct": float(df["err_ttft_s_pct"].abs().median()),
        "ttft_low_conc_mdape_pct": float(df.loc[df["conc"] <= TTFT_FIT_MAX_CONC, "err_ttft_s_pct"].abs().median()),
    }
