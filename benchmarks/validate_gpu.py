"""Replay every GPU calibration row through the code users run and report the error per group.

    python benchmarks/validate_gpu.py                 # every row of the calibration CSV
    python benchmarks/validate_gpu.py --limit 40      # a quick look (first 40 rows)
    python benchmarks/validate_gpu.py --projection    # also validate the projection rule

Each row (one measured run) goes through `lpxsim.backends.factory.make_step_model` and
`lpxsim.plan.estimate.steady_state`, exactly what `lpxsim estimate --system ...
--tp --ep [--dp-attention] --weights --kv --framework --isl --osl --concurrency`
runs, with the benchmark's mean drawn lengths (0.9 x nominal); the throughput is then
scaled to the benchmark's finite run of 10 x C requests (`run_throughput_factor`:
the run ends with its last request, about half a cycle after the steady state
would have delivered the same tokens). Prints the median
absolute % error of TPOT, output tok/s per GPU and TTFT per group (GPU,
framework, precision, MTP, disaggregated, concurrency band), and their median
signed errors (bias).

--projection prices DeepSeek-R1 decode steps and prefill chunks on a measured GPU
twice, from its own tables and projected from a sibling's (B200 -> B300,
H100 -> H200, GB200 -> GB300), and reports the error of the projection rule.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections import defaultdict
from importlib import resources

SYSTEMS = {"H100": "h100-hgx", "H200": "h200-hgx", "B200": "b200-hgx", "B300": "b300-hgx", "GB200": "gb200-nvl72",
           "GB300": "gb300-nvl72", "MI300X": "mi300x", "MI325X": "mi325x", "MI355X": "mi355x"}
KV_FORMAT = {"sglang": "bf16", "trt": "fp8", "trtllm": "fp8", "vllm": "bf16"}
LENGTH_RATIO = 0.9
# InferenceX's client: --num-prompts 10 x C --max-concurrency C (benchmarks/dsr1_*.sh; docs/sources.md "IX-TRT")
PROMPTS_PER_USER = 10
PAIRS = (("b200-hgx", "b300-hgx"), ("h100-hgx", "h200-hgx"), ("gb200-nvl72", "gb300-nvl72"))


def _rows(path: str | None) -> list[dict]:
    p = path or str(resources.files("lpxsim").joinpath("data", "measured", "inferencex_dsr1_calibration.csv"))
    with open(p, newline="") as fh:
        return list(csv.DictReader(fh))


def _replay(r: dict, cache: dict) -> dict | None:
    from lpxsim.backends.factory import Layout, make_step_model
    from lpxsim.core.errors import UserError
    from lpxsim.plan.estimate import steady_state

    fw = {"trt": "trtllm"}.get(r["framework"], r["framework"])
    dp = r["dp_attention"].lower() in ("true", "1")
    key = (r["hardware"], fw, r["precision"], int(r["tp"]), int(r["ep"]), dp)
    if key not in cache:
        lay = Layout(gpus=int(r["tp"]), tp=int(r["tp"]), ep=int(r["ep"]), dp_attention=dp, framework=fw)
        cache[key] = make_step_model("deepseek-r1", SYSTEMS[r["hardware"]], lay, weights=r["precision"],
                                     kv=KV_FORMAT.get(fw, "bf16"))
    isl, osl = round(LENGTH_RATIO * int(r["isl"])), round(LENGTH_RATIO * int(r["osl"]))
    try:
        e = steady_state(cache[key], isl=isl, osl=osl, concurrency=int(r["conc"]))
    except UserError:
        return None
    return {"tpot_s": e.tpot_s, "ttft_s": e.ttft_s,
            "output_tok_s_per_gpu": e.output_tok_s_per_chip * run_throughput_factor(int(r["conc"]))}


def run_throughput_factor(conc: int, prompts_per_user: int = PROMPTS_PER_USER) -> float:
    """Measured / steady-state output throughput of the benchmark's finite run.

    InferenceX sends `prompts_per_user` x C requests through C concurrent clients and divides the output
    tokens by the run's wall time, which ends when the last request does. The clients' last requests,
    desynchronised over one request cycle, end spread over that cycle: the last of C ends (C - 1) /
    (2 (C + 1)) cycles after their mean (the maximum of C uniforms). The run therefore lasts
    prompts_per_user + (C - 1) / (2 (C + 1)) cycles for prompts_per_user cycles of steady-state work.
    """
    tail = (conc - 1) / (2.0 * (conc + 1))
    return prompts_per_user / (prompts_per_user + tail)


def _err(pred: float, meas: str) -> float | None:
    """Signed % error of a prediction against a measured cell (None where the cell is empty)."""
    try:
        m = float(meas)
    except ValueError:
        return None
    return 100.0 * (pred / m - 1.0) if m > 0 else None


def validate(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Median absolute % errors per group (and 'all')."""
    cache: dict = {}
    errs: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    skipped = 0
    for r in rows:
        p = _replay(r, cache)
        if p is None:
            skipped += 1
            continue
        flagged = r.get("flag_intvty_vs_n_gpus_gt15pct", "0") in ("1", "1.0")
        groups = ["all", f"gpu={r['hardware']}", f"framework={r['framework']}", f"precision={r['precision']}",
                  f"mtp={r['spec_method'] != 'none'}", f"disagg={r['disagg']}",
                  "conc>=128" if int(r["conc"]) >= 128 else "conc<128"]
        for g in groups:
            for k, col in (("tpot", "tpot_median_s"), ("ttft", "ttft_median_s")):
                e = _err(p[f"{k}_s"], r[col])
                if e is not None:
                    errs[g][k].append(e)
            if not flagged:  # a benchmark artefact in throughput only (data README)
                e = _err(p["output_tok_s_per_gpu"], r["output_tput_per_gpu"])
                if e is not None:
                    errs[g]["output_tok_s_per_gpu"].append(e)
    out = {g: {k: round(statistics.median(abs(x) for x in v), 1) for k, v in d.items()}
           | {f"{k}_signed": round(statistics.median(v), 1) for k, v in d.items()} | {"rows": len(d["tpot"])}
           for g, d in errs.items()}
    out["all"]["skipped_do_not_fit"] = skipped
    return out


def projection() -> list[dict]:
    """Error of projecting each measured GPU's step times from its sibling, DeepSeek-R1 fp8 TP8 SGLang."""
    from lpxsim.gpu.step import GpuStepModel
    from lpxsim.step.protocol import DecodeBatch, PrefillChunk

    res = []
    for src, dst in PAIRS:
        real = GpuStepModel("deepseek-r1", dst, tp=8, weights="fp8")
        proj = GpuStepModel("deepseek-r1", dst, tp=8, weights="fp8", project_from=src)
        errs = []
        for b in (1, 8, 32, 128):
            for ctx in (1024, 8192):
                batch = DecodeBatch.uniform(b, ctx)
                errs.append(100.0 * (proj.decode_step(batch).latency_s / real.decode_step(batch).latency_s - 1))
        for n in (1024, 8192):
            errs.append(100.0 * (proj.prefill(PrefillChunk(n)).interval_s / real.prefill(PrefillChunk(n)).interval_s - 1))
        res.append({"from": src, "to": dst, "steps": len(errs),
                    "median_abs_err_pct": round(statistics.median(abs(e) for e in errs), 1),
                    "max_abs_err_pct": round(max(abs(e) for e in errs), 1),
                    "mean_signed_err_pct": round(statistics.fmean(errs), 1)})
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", help="calibration CSV (default: the packaged copy)")
    ap.add_argument("--limit", type=int, help="only the first N rows")
    ap.add_argument("--projection", action="store_true", help="also validate the projection rule")
    args = ap.parse_args(argv)
    rows = _rows(args.csv)[: args.limit] if args.limit else _rows(args.csv)
    res = validate(rows)
    print(f"{'group':<22} {'rows':>5} {'TPOT':>7} {'out tok/s/GPU':>14} {'TTFT':>7}   (median |error| %; "
          "then the median signed error, + = predicted high)")
    nan = float("nan")
    for g in sorted(res, key=lambda k: (k != "all", k)):
        d = res[g]
        print(f"{g:<22} {d['rows']:>5} {d.get('tpot', nan):>7} {d.get('output_tok_s_per_gpu', nan):>14} "
              f"{d.get('ttft', nan):>7}   signed {d.get('tpot_signed', nan):+6.1f} "
              f"{d.get('output_tok_s_per_gpu_signed', nan):+6.1f} {d.get('ttft_signed', nan):+6.1f}")
    if res["all"].get("skipped_do_not_fit"):
        print(f"skipped (KV of all streams does not fit): {res['all']['skipped_do_not_fit']}", file=sys.stderr)
    if args.projection:
        print("\nprojection rule (DeepSeek-R1 fp8 TP8 SGLang: decode B 1-128 x ctx 1k/8k, prefill 1k/8k)")
        for p in projection():
            print(f"  {p['from']:>12} -> {p['to']:<12} median |err| {p['median_abs_err_pct']:5.1f} %  "
                  f"max {p['max_abs_err_pct']:5.1f} %  mean signed {p['mean_signed_err_pct']:+5.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
