"""Fit the GPU cost model's shared parameters on the InferenceX DeepSeek-R1 calibration points.

    .venv/bin/python benchmarks/fit_gpu.py            # fit on all points, write catalog/fitted/gpu_fit.json
    .venv/bin/python benchmarks/fit_gpu.py --dry-run  # fit and report, write nothing

Also reports leave-one-hardware-out (fit on H200, predict B200, and the reverse)
and writes the per-point table to docs/gpu_fit_points.md when asked (--points).
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

from lpxsim.gpu.calibration import LENGTH_RATIO, data_path, fit, load_points, point_models, predict, summary
from lpxsim.gpu.params import BOUNDS, FITTED_NAMES, GpuParams, fit_path

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="do not write the fit file")
    ap.add_argument("--points", type=Path, help="write the per-point table (markdown) here")
    ap.add_argument("--no-loho", action="store_true", help="skip leave-one-hardware-out")
    args = ap.parse_args(argv)

    pts = load_points()
    pms, rejected = point_models(pts)
    print(f"{len(pms)} configurations ({int(pts['runs'].sum())} runs); {len(rejected)} rejected", file=sys.stderr)
    for r in rejected:
        print(f"  rejected: {r['hardware']} {r['framework']} {r['precision']} TP{r['tp']} {r['isl']}/{r['osl']} "
              f"conc {r['conc']}: {r['reason']}", file=sys.stderr)
    prior = summary(predict(pms, GpuParams()))
    params = fit(pms)
    table = predict(pms, params)
    result = {"prior": prior, "fit": summary(table)}
    loho = {}
    if not args.no_loho:
        for train, test in (("H200", "B200"), ("B200", "H200")):
            p = fit([pm for pm in pms if pm.row["hardware"] == train])
            held = predict([pm for pm in pms if pm.row["hardware"] == test], p)
            loho[f"fit_{train}_predict_{test}"] = summary(held) | {"params": _rounded(p)}
        result["leave_one_hardware_out"] = loho
    print(json.dumps({"params": _rounded(params)} | result, indent=2))
    if args.points:
        _write_atomic(args.points, _markdown(table[COLS]))
    if not args.dry_run:
        raw = data_path().read_bytes()
        doc = {
            "params": _rounded(params),
            "fitted": list(FITTED_NAMES),
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
