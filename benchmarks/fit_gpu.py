"""Fit the GPU engine parameters on the InferenceX DeepSeek-R1 calibration points.

    .venv/bin/python benchmarks/fit_gpu.py            # fit on all points, write catalog/fitted/gpu_fit.json
    .venv/bin/python benchmarks/fit_gpu.py --dry-run  # fit and report, write nothing

Op times come from measured kernels (aiconfigurator-core); what is fitted is
only what the tables do not hold: per framework, the engine's per-step host time
and first-token host time, and (shared by all GPUs and frameworks) the
per-kernel overhead of the few ops no table covers and the host's per-kernel
dispatch time of an eager prefill pass (gpu/calibration.py `fit_engines`); then each framework's per-step host
time once more per release, the month of a run (`fit_releases`). Writes the per-point table when asked (--points).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from lpxsim.gpu.calibration import (
    FIT_SHARED,
    LENGTH_RATIO,
    data_path,
    fit_engines,
    fit_releases,
    load_dated_points,
    load_points,
    point_models,
    predict,
    summary,
)
from lpxsim.gpu.engine import FITTED as ENGINE_FITTED
from lpxsim.gpu.engine import POOLED, engine_params
from lpxsim.gpu.params import BOUNDS, GpuParams, fit_path

COLS = ["hardware", "framework", "precision", "tp", "ep", "dp_attention", "isl", "osl", "conc", "runs",
        "tpot_s", "pred_tpot_s", "err_tpot_s_pct", "total_tok_s_per_gpu", "pred_total_tok_s_per_gpu",
        "err_total_tok_s_per_gpu_pct"]


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _markdown(df) -> str:
    """A plain markdown table (no tabulate dependency)."""
    cells = [[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row] for row in df.itertuples(index=False)]
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(r) + " |\n" for r in cells)


def _rounded(p: GpuParams) -> dict[str, float]:
    return {k: float(f"{v:.4g}") for k, v in asdict(p).items()}


def _release_summary(dated, params, engines, releases) -> dict:  # noqa: ANN001 - calibration's types
    """TPOT error over every configuration and month (`load_dated_points`) with the engines' pooled host time and
    with each month's own release (`fit_releases`)."""
    pooled = predict(dated, params, engines)
    own = pooled.copy()
    for i, pm in enumerate(dated):
        fw = pm.step.framework
        rel = releases.get(fw, {}).get(str(pm.row["release"]))
        if rel is None:
            continue
        p = pm.predict(params, engine_params(fw, POOLED).with_values(**(engines[fw] | rel)))
        own.loc[i, "err_tpot_s_pct"] = 100.0 * (p["tpot_s"] / pm.row["tpot_s"] - 1.0)
    return {"points": len(dated),
            "tpot_mdape_pct_pooled": float(pooled["err_tpot_s_pct"].abs().median()),
            "tpot_mdape_pct_by_release": float(own["err_tpot_s_pct"].abs().median())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="do not write the fit file")
    ap.add_argument("--points", type=Path, help="write the per-point table (markdown) here")
    args = ap.parse_args(argv)

    pts = load_points()
    pms, rejected = point_models(pts)
    print(f"{len(pms)} configurations ({int(pts['runs'].sum())} runs); {len(rejected)} rejected", file=sys.stderr)
    for r in rejected:
        print(f"  rejected: {r['hardware']} {r['framework']} {r['precision']} TP{r['tp']} {r['isl']}/{r['osl']} "
              f"conc {r['conc']}: {r['reason']}", file=sys.stderr)
    prior = summary(predict(pms))
    engines, params = fit_engines(pms)
    table = predict(pms)
    dated, _ = point_models(load_dated_points())
    releases = fit_releases(dated, params, engines)
    result = {"prior": prior, "fit": summary(table), "release_fit": _release_summary(dated, params, engines, releases)}
    print(json.dumps({"params": _rounded(params), "engines": engines, "releases": releases} | result, indent=2))
    if args.points:
        _write_atomic(args.points, _markdown(table[COLS]))
    if not args.dry_run:
        raw = data_path().read_bytes()
        doc = {
            "params": _rounded(params),
            "engines": {fw: {k: float(f"{v:.4g}") for k, v in e.items()}
                        | {"releases": {m: {k: float(f"{v:.4g}") for k, v in r.items()}
                                        for m, r in releases.get(fw, {}).items()}}
                        for fw, e in engines.items()},
            "fitted": list(FIT_SHARED) + [f"engines.<framework>.{k}" for k in ENGINE_FITTED]
                      + ["engines.<framework>.releases.<month>.step_overhead_s"],
            "bounds": {k: list(v) for k, v in BOUNDS.items()},
            "data": {
                "file": f"lpxsim/data/measured/{data_path().name}",
                "sha256": hashlib.sha256(raw).hexdigest(),
                "source": "InferenceX (SemiAnalysis) via vngcloud/InferenceX-app@7fe6d62; DeepSeek-R1-0528 on "
                          "H200 and B200, SGLang and TensorRT-LLM, fp8/fp4, aggregated single node",
                "configurations": len(pms),
                "rejected": [{k: r[k] for k in ("hardware", "framework", "precision", "tp", "ep", "isl", "osl",
                                                "conc", "reason")} for r in rejected],
                "length_ratio": LENGTH_RATIO,
            },
            "error": result,
            "command": "python benchmarks/fit_gpu.py",
        }
        _write_atomic(fit_path(), json.dumps(doc, indent=2, default=str) + "\n")
        print(f"wrote {fit_path()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
