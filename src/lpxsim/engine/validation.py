"""The validation tables of docs/validation.md, from data shipped in the package (`lpxsim validate`).

Four cost paths (`lpxsim.engine.bands.PATHS`), each replayed through the code users run:

- measured GPU: every row of ``data/measured/inferencex_dsr1_calibration.csv`` through the `GpuStepModel` and
  `steady_state` that `lpxsim estimate --system ... --tp --ep [--dp-attention] --weights --framework` runs, with
  the engine release of the row's date where `estimate` takes the latest (`row_release`), at the benchmark's mean
  drawn lengths (0.9 x nominal), throughput scaled to the benchmark's finite run;
- projected GPU: the same rows with each GPU priced from a measured sibling's tables by achieved rates instead of
  its own (H200 from H100, B200 from B300), and the step-level projection pairs;
- saturated offline throughput: MLPerf Inference Offline results, v5.0 to v6.1 (``data/measured/mlperf_v51_offline.csv``,
  judges only) against `engine.offline.offline_throughput` at the layout and engine caps each submission states
  (where it states them), at the best tensor-parallel layout that fits, and the closed loop's number at its
  largest fitting concurrency (what the saturated regime replaced; item 5);
- compiled LPX and wafer-scale: the published points of ``data/measured/published_points.csv`` (each with its
  conditions and source). A point measured under known conditions is predicted under them; where the load on
  a shared endpoint is unknown the prediction is a range, from a dedicated batch-1 stream down to a full
  pipeline, and the check is that the figure falls inside (issue 28, item 6).

Each table gives the median absolute error and the MAPE (and the median signed error: + = predicted high).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from lpxsim.core.benchmark_client import LENGTH_RATIO
from lpxsim.core.errors import UserError
from lpxsim.engine.bands import PATHS, error_stats
from lpxsim.engine.solver_check import queueing_solvers

if TYPE_CHECKING:
    from lpxsim.engine.benchmark_run import RunLatencies
    from lpxsim.step.protocol import StepModel

SYSTEMS = {"H100": "h100-hgx", "H200": "h200-hgx", "B200": "b200-hgx", "B300": "b300-hgx",
           "GB200": "gb200-nvl72", "GB300": "gb300-nvl72", "MI300X": "mi300x", "MI325X": "mi325x",
           "MI355X": "mi355x"}
PROMPTS_PER_USER = 10  # InferenceX's client: --num-prompts 10 x C --max-concurrency C (docs/sources.md IX-TRT)
# projected replay: each calibration GPU priced from a measured sibling of the same rack kind
PROJECT_FROM = {"h200-hgx": "h100-hgx", "b200-hgx": "b300-hgx"}
PROJECTION_PAIRS = (("b200-hgx", "b300-hgx"), ("h100-hgx", "h200-hgx"), ("gb200-nvl72", "gb300-nvl72"))
# issue 28's judge of a published SRAM-machine figure whose conditions are known (dedicated, stated load): the
# batch-1 answer within this many percent; a shared endpoint's figure must fall inside its predicted range instead
KNOWN_CONDITIONS_TOLERANCE_PCT = 30.0


def _data(name: str) -> str:
    return str(resources.files("lpxsim").joinpath("data", "measured", name))


def packaged_rows(name: str, path: str | None = None) -> list[dict]:
    """The rows of the packaged CSV `name` (data/measured), or of `path` where given."""
    with open(path or _data(name), newline="") as fh:
        return list(csv.DictReader(fh))


def calibration_rows(path: str | None = None) -> list[dict]:
    """The packaged InferenceX calibration rows (or those of `path`)."""
    with open(path or _data("inferencex_dsr1_calibration.csv"), newline="") as fh:
        return list(csv.DictReader(fh))


ROW_COLUMNS = ("hardware", "framework", "precision", "tp", "ep", "dp_attention", "isl", "osl", "conc")
# the latencies a row file states, first found wins: InferenceX's results give medians, its pull requests' tables means
LATENCY_STATISTICS = ("median", "mean")
UNKNOWN_GPU = "a GPU not in the catalog:"  # `user_rows`' left-out reasons, each followed by the row's name
UNKNOWN_ENGINE = "an engine lpxsim has no parameters for:"
SPEC_METHODS = ("mtp", "eagle")  # the model's own MTP head drafting (SGLang runs DeepSeek's MTP as EAGLE)
# A disaggregated row's two pools (InferenceX's columns): each pool's layout and replicas
POOL_COLUMNS = ("prefill_tp", "prefill_ep", "prefill_workers", "decode_tp", "decode_ep", "decode_workers")
# optional: the decode engine's stated cap on running sequences, a rank's (TensorRT-LLM's max_batch_size; blank: none)
DECODE_CAP_COLUMN = "decode_max_batch"
NO_POOLS = "disaggregated without its pools' layouts (prefill_/decode_ tp, ep, workers: blank or 0)"
DISAGGREGATED_GROUP = "serving=disaggregated"
# InferenceX names a disaggregated run's engine after the layer that routes its KV (NVIDIA Dynamo; AMD's MoRI):
# "dynamo-trt", "dynamo-sglang", "mori-sglang". The engine that prices its steps is the rest of the name.
KV_ROUTERS = ("dynamo-", "mori-")
MODEL_NAMES = ("deepseek-r1", "dsr1")  # a row's model: DeepSeek-R1 by its name or InferenceX's short one


def user_rows(path: str) -> tuple[list[dict], dict[str, int]]:
    """Rows of an InferenceX-format CSV (the calibration set's columns, any catalog GPU) that the replay
    prices, and how many of the others were left out, by reason: disaggregated serving is not replayed (the
    row names its prefill and decode pools, but the replay prices one aggregated deployment), nor another model
    than DeepSeek-R1, nor a GPU outside the catalog or an engine without parameters (each named: AMD's ATOM,
    say), nor a speculative-decoding row whose draft length is unknown. A speculative row's drafts
    per round are its `spec_draft_tokens` column, else what InferenceX's launch script for its engine sets
    (`inferencex_launch.launch_draft_tokens`; the row is marked `spec_draft_source` "launch script"); its
    acceptance is DeepSeek-R1's under InferenceX's chat-templated prompts (`replay_row`). Latencies are compared
    with the file's medians (`tpot_median_s`, `ttft_median_s`), else its means (`*_mean_s`: the statistic InferenceX's
    pull-request tables quote; `latency_statistic` says which). A file that cannot be
    read, a missing column, a bad value or no row left to replay is a UserError naming it."""
    from lpxsim.core.frameworks import FRAMEWORKS, canonical
    from lpxsim.core.inputs import check_path, is_file
    from lpxsim.engine.inferencex_launch import launch_draft_tokens
    from lpxsim.specs.precision import get_precision

    check_path(path, "rows")
    if not is_file(path):  # a folder, or a device or FIFO a read would never finish (/dev/zero)
        raise UserError("rows", f"{path} is not a file" if Path(path).exists() else f"no such file: {path}")
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            names = reader.fieldnames or ()
            stat = next((s for s in LATENCY_STATISTICS if f"tpot_{s}_s" in names and f"ttft_{s}_s" in names), None)
            # a file of disaggregated rows names its pools' layouts instead of one (an aggregated row in it still needs
            # its own: `_check_row` names the empty cell)
            pools = "disagg" in names and all(c in names for c in POOL_COLUMNS)
            missing = ([c for c in ROW_COLUMNS if c not in names and not (pools and c in ("tp", "ep", "dp_attention"))]
                       + ([] if stat else ["tpot_median_s", "ttft_median_s"]))
            if missing:
                raise UserError("rows", f"{path} lacks the column(s) {', '.join(missing)} (InferenceX format: "
                                        "see data/measured/README.md; tpot_mean_s and ttft_mean_s also do)")
            raw = list(reader)
    except (OSError, UnicodeDecodeError) as e:
        raise UserError("rows", f"cannot read {path}: {e}") from None
    keep: list[dict] = []
    left: dict[str, int] = defaultdict(int)
    for i, r in enumerate(raw, start=2):  # line 1 is the header
        disagg = _flag_value(r, "disagg", i)
        if disagg and any((r.get(c) or "").strip() in ("", "0", "0.0") for c in POOL_COLUMNS):
            left[NO_POOLS] += 1
            continue
        if not any(name in (r.get("model") or "DeepSeek-R1").lower() for name in MODEL_NAMES):
            left["another model"] += 1
            continue
        hardware, framework = r["hardware"].strip().upper(), r["framework"].strip().lower()
        if hardware not in SYSTEMS:  # a GPU the catalog lacks: left out and named, not the whole file refused
            left[f"{UNKNOWN_GPU} {r['hardware'].strip()!r}"] += 1
            continue
        framework = next((framework[len(p):] for p in KV_ROUTERS if framework.startswith(p)), framework)
        engine = canonical(framework)
        if engine is None:  # e.g. AMD's ATOM: no engine parameters to price it with
            left[f"{UNKNOWN_ENGINE} {r['framework'].strip()!r}"] += 1
            continue
        framework = "trt" if framework == "trt" else engine  # InferenceX's own name for TensorRT-LLM is kept
        spec = (r.get("spec_method") or "none").strip().lower()
        k, k_source = 0, ""
        if spec not in ("", "none"):
            try:
                k, k_source = int(r.get("spec_draft_tokens") or 0), "row"
            except ValueError:
                k = 0
            if k < 1:
                dp = _flag(r, "decode_dp_attention" if disagg else "dp_attention", default=False)
                rank_batch = _decode_rank_batch(r, dp) if disagg else None
                k, k_source = launch_draft_tokens(hardware, engine, dp, rank_batch) or 0, "launch script"
            if spec not in SPEC_METHODS or k < 1:
                left["speculative decoding without a known draft length"] += 1
                continue
        whole = _check_row(r, i, stat, disagg)
        try:
            get_precision(r["precision"], "weights")
        except UserError as e:
            raise UserError("rows", f"line {i}: precision: {e.message}") from None
        row = dict(r, **whole, hardware=hardware, framework=framework, spec_method=spec if k else "none",
                   spec_draft_tokens=str(k), spec_draft_source=k_source, latency_statistic=stat,
                   disagg="true" if disagg else "false")
        if disagg:  # the layout columns a reader of one layout reads (groups, the attention-DP record) are the decode pool's
            row.update(tp=row["decode_tp"], ep=row["decode_ep"], dp_attention=row["decode_dp_attention"])
        keep.append(row)
    if not keep:
        why = "; ".join(f"{n} {reason}" for reason, n in sorted(left.items())) or "the file has no data row"
        raise UserError("rows", f"{path} has no row to replay ({why}); the replay prices DeepSeek-R1 serving "
                                f"(aggregated, or disaggregated with its pools' layouts) on {', '.join(SYSTEMS)} under "
                                f"{', '.join(FRAMEWORKS)} (trt for trtllm)")
    return keep, dict(left)


def _decode_rank_batch(r: dict, dp_attention: bool) -> float | None:
    """Users a decode rank of disaggregated row `r` serves: its concurrency over the decode workers (and, with
    attention data-parallelism, over each worker's ranks); None where a value is not a number (`_check_row` names
    it)."""
    try:
        ranks = int(r["decode_workers"]) * (int(r["decode_tp"]) if dp_attention else 1)
        return int(r["conc"]) / ranks if ranks > 0 else None
    except (KeyError, TypeError, ValueError):
        return None


def _check_row(r: dict, line: int, stat: str, disagg: bool = False) -> dict[str, str]:
    """A kept user row's values, each checked by name before anything is priced (UserError naming the first bad
    one; rows left out, of another model, GPU or engine, are counted, not checked). A disaggregated row's layout
    is its pools' columns (POOL_COLUMNS; its tp and ep are not read). Returns the whole-number columns as plain
    integers ("8.0", as a spreadsheet writes it, is 8)."""
    whole: dict[str, str] = {}
    layout = POOL_COLUMNS if disagg else ("tp", "ep")
    for c in (*layout, "isl", "osl", "conc"):
        whole[c] = _whole_number(r, c, line)
    for c in (f"tpot_{stat}_s", f"ttft_{stat}_s"):
        v = (r.get(c) or "").strip()
        try:
            x = float(v)
            ok = math.isfinite(x) and x > 0
        except ValueError:
            ok = False
        if not ok:
            raise UserError("rows", f"line {line}: {c} {v!r} must be a positive number of seconds")
    for c in ("prefill_dp_attention", "decode_dp_attention") if disagg else ("dp_attention",):
        whole[c] = "true" if _flag_value(r, c, line) else "false"
    if disagg and (r.get(DECODE_CAP_COLUMN) or "").strip():  # optional: blank is no stated cap
        whole[DECODE_CAP_COLUMN] = _whole_number(r, DECODE_CAP_COLUMN, line, " or blank")
    return whole


def _whole_number(r: dict, column: str, line: int, alternative: str = "") -> str:
    """A user row's whole-number column (1 up to what the command line takes for it, `_column_max`; "8.0" is 8)
    as a plain integer string; anything else is refused by name (`alternative`: what else the column may hold,
    for the message)."""
    v = (r.get(column) or "").strip()
    top = _column_max(column)
    try:
        x = float(v)
        ok = x.is_integer() and 1 <= x <= top
    except ValueError:
        ok = False
    if not ok:
        raise UserError("rows", f"line {line}: {column} {v!r} must be a whole number in 1..{top:,}{alternative}")
    return str(int(x))


def _column_max(column: str) -> int:
    """The largest value a whole-number row column may hold: the command line's bound for the same quantity (a
    30-digit concurrency had left every row unpriced, and the run exit 0)."""
    from lpxsim.core import inputs

    if column.endswith(("tp", "ep")):
        return inputs.PARALLEL_MAX
    if column.endswith("workers"):
        return inputs.CHIPS_MAX
    return inputs.TOKENS_MAX if column in ("isl", "osl") else inputs.CONCURRENCY_MAX


def _flag_value(r: dict, column: str, line: int) -> bool:
    """A user row's true/false column (true, false, 1, 0 or blank = false); anything else is refused by name."""
    v = (r.get(column) or "").strip().lower()
    if v not in ("", "true", "false", "1", "0"):
        raise UserError("rows", f"line {line}: {column} {r.get(column)!r} must be true or false")
    return v in ("true", "1")


def replay_user_rows(path: str) -> dict:
    """The measured-GPU table for the rows of `path` (`user_rows`), each GPU priced the way `estimate` prices
    it (its own measured tables, or projected from a sibling; `cost_path` names which)."""
    from lpxsim.engine.bands import path_for

    rows, left = user_rows(path)
    cache: dict = {}
    priced = [priced_row(r, False, cache) for r in rows]
    res = gpu_replay(rows, priced=priced)
    res["rows"] = [_row_result(r, p, why) for r, (p, why) in zip(rows, priced, strict=True)]
    res["left_out"] = left
    res["latency_statistic"] = rows[0]["latency_statistic"]
    res["drafts_from_launch_script"] = sum(r.get("spec_draft_source") == "launch script" for r in rows)
    pairs = sorted({(r["hardware"], r["precision"]) for r in rows})
    res["cost_path"] = {f"{h} {p}": path_for(SYSTEMS[h], p) for h, p in pairs}
    return res


def _row_result(r: dict, p: dict | None, why: str | None) -> dict:
    """One replayed row as `replay_user_rows` reports it: its configuration, measured and predicted figures and
    errors (percent), or the reason it could not be priced."""
    stat = r.get("latency_statistic", "median")
    out = {k: r.get(k) for k in ("point_id", "hardware", "framework", "precision", "spec_method",
                                 "spec_draft_tokens", "tp", "ep", "dp_attention", "disagg", "isl", "osl", "conc")}
    if _flag(r, "disagg", default=False):
        out |= {c: r[c] for c in (*POOL_COLUMNS, "prefill_dp_attention", "decode_dp_attention")}
    out |= {"tpot_s": float(r[f"tpot_{stat}_s"]), "ttft_s": float(r[f"ttft_{stat}_s"]),
            "output_tok_s_per_gpu": _float_or_none(r.get("output_tput_per_gpu")), "skipped": why}
    if p is not None:
        out |= {"pred_tpot_s": p["tpot_s"], "pred_ttft_s": p["ttft_s"],
                "pred_output_tok_s_per_gpu": p["output_tok_s_per_gpu"],
                "tpot_err_pct": _pct(p["tpot_s"], out["tpot_s"]), "ttft_err_pct": _pct(p["ttft_s"], out["ttft_s"]),
                "output_tok_s_per_gpu_err_pct": _pct(p["output_tok_s_per_gpu"], out["output_tok_s_per_gpu"])}
    return out


def _float_or_none(v: str | None) -> float | None:
    try:
        return float(v) if v not in (None, "") else None
    except ValueError:
        return None


PR_BASELINES = "inferencex_pr_baselines.csv"


def pr_baseline_rows(path: str | None = None) -> list[dict]:
    """InferenceX rows of configurations outside the calibration set (B300, MI325X, MI355X, MTP) that InferenceX's
    own pull requests quote as their baselines (mean latencies), read as `user_rows` reads a user's file: judges,
    never fitted."""
    return user_rows(path or _data(PR_BASELINES))[0]


def pr_baselines(rows: list[dict]) -> dict:
    """Each pull-request baseline priced as the calibration replay prices a row (`priced_row`), and the replay's
    group statistics over them."""
    cache: dict = {}
    priced = [priced_row(r, cache=cache) for r in rows]
    points = []
    for r, (p, why) in zip(rows, priced, strict=True):
        points.append({"id": r["point_id"], "hardware": r["hardware"], "precision": r["precision"],
                       "spec": r["spec_method"], "tp": int(r["tp"]), "ep": int(r["ep"]), "isl": int(r["isl"]),
                       "osl": int(r["osl"]), "conc": int(r["conc"]), "date": r["date"],
                       "tpot_s": float(r[f"tpot_{r['latency_statistic']}_s"]),
                       "ttft_s": float(r[f"ttft_{r['latency_statistic']}_s"]),
                       "pred_tpot_s": None if p is None else p["tpot_s"],
                       "pred_ttft_s": None if p is None else p["ttft_s"],
                       "pred_steady_ttft_s": None if p is None else p["steady_ttft_s"], "skipped": why})
    return {"points": points, "replay": gpu_replay(rows, priced=priced)}


AMD_PUBLIC = "amd_public_serving.csv"


def vendor_judge_rows(path: str | None = None) -> list[dict]:
    """A GPU maker's own public serving points outside InferenceX (data/measured/amd_public_serving.csv): median
    TPOT only, no first-token time; judges, never fitted."""
    with open(path or _data(AMD_PUBLIC), newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [{**r, "spec_method": "none", "latency_statistic": "median"} for r in rows]


def vendor_judges(rows: list[dict]) -> list[dict]:
    """Each of `vendor_judge_rows` priced as the replay prices a row (`priced_row`): its TPOT beside the prediction."""
    cache: dict = {}
    out = []
    for r in rows:
        p, why = priced_row(r, cache=cache)
        out.append({"id": r["point_id"], "hardware": r["hardware"], "precision": r["precision"], "tp": int(r["tp"]),
                    "ep": int(r["ep"]), "isl": int(r["isl"]), "osl": int(r["osl"]), "conc": int(r["conc"]),
                    "date": r["date"], "source": r["source"], "tpot_s": float(r["tpot_median_s"]),
                    "pred_tpot_s": None if p is None else p["tpot_s"], "skipped": why})
    return out


def vendor_records(points: list[dict]) -> dict:
    """For each GPU maker whose GPUs no measured table covers (they are projected from another maker's: AMD), the
    signed errors of every judge point of its GPUs, over all of them and per GPU: tok/s/user (TPOT measured /
    predicted - 1) and, where the point gives one, TTFT (predicted / measured - 1). What a cross-vendor answer's
    band is widened to and quotes (`engine.bands.band_for`, `band_caveat`). `points`: judge points with `hardware`,
    `tpot_s`, `pred_tpot_s` and maybe `ttft_s`, `pred_ttft_s` (InferenceX's pull-request baselines,
    `vendor_judges`)."""
    from lpxsim.engine.bands import unvalidated_vendor

    errs: dict[str, dict[str, dict[str, list[tuple[str, float]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for p in points:
        if p.get("pred_tpot_s") is None or p.get("spec", "none") != "none":
            continue
        vendor = unvalidated_vendor(SYSTEMS[p["hardware"]])
        if not vendor:
            continue
        for metric, err in _judge_errors(p):
            errs[vendor][metric][p["hardware"]].append((p["id"], err))

    return {v: {"data": "public serving points of its GPUs (InferenceX pull-request baselines; the maker's own "
                        "published runs, data/measured/amd_public_serving.csv), priced as the calibration replay "
                        "prices a row; signed error of tok/s/user and, where given, TTFT",
                "metrics": {m: {**_judge_record([x for g in gpus.values() for x in g]),
                                "gpus": {g: _judge_record(pairs) for g, pairs in sorted(gpus.items())}}
                            for m, gpus in sorted(by_metric.items())}}
            for v, by_metric in sorted(errs.items())}


def _judge_errors(p: dict) -> list[tuple[str, float]]:
    """A priced judge point's signed % errors: tok/s/user (TPOT measured / predicted - 1) and, where it gives one,
    TTFT (predicted / measured - 1)."""
    out = [("tok_s_user", 100.0 * (p["tpot_s"] / p["pred_tpot_s"] - 1.0))]
    if p.get("ttft_s") and p.get("pred_ttft_s"):
        out.append(("ttft", 100.0 * (p["pred_ttft_s"] / p["ttft_s"] - 1.0)))
    return out


def _judge_record(pairs: list[tuple[str, float]]) -> dict:
    """Error statistics of (point id, signed % error) pairs, with their range and the points' ids."""
    e = [v for _, v in pairs]
    return {**error_stats(e).as_row(), "min_signed_pct": round(min(e), 1), "max_signed_pct": round(max(e), 1),
            "points": sorted(i for i, _ in pairs)}


def system_records(points: list[dict], calibrated: set[str]) -> dict:
    """For each catalog system outside the calibration set (`calibrated`: its GPUs' names) whose own public serving
    points are judges, the signed errors of those points: tok/s/user (TPOT measured / predicted - 1) and TTFT
    (predicted / measured - 1). The calibration replay is in-sample and never ran these GPUs, so a judge's error
    on its own system is the only end-to-end record of that system; its answers' bands are no narrower than it
    (`engine.bands.band_for`). Speculative-decoding points are left out: they judge the drafting path, not the
    GPU. `points`: as `vendor_records` takes them."""
    errs: dict[str, dict[str, list[tuple[str, float]]]] = defaultdict(lambda: defaultdict(list))
    for p in points:
        if p.get("pred_tpot_s") is None or p.get("spec", "none") != "none" or p["hardware"] in calibrated:
            continue
        for metric, err in _judge_errors(p):
            errs[SYSTEMS[p["hardware"]]][metric].append((p["id"], err))
    return {s: {"data": "its own public serving points (InferenceX pull-request baselines; a maker's own published "
                        "runs), priced as the calibration replay prices a row; judges, never fitted",
                "metrics": {m: _judge_record(pairs) for m, pairs in sorted(by_metric.items())}}
            for s, by_metric in sorted(errs.items())}


def speculative_record(points: list[dict], one_user: list[dict]) -> dict:
    """lpxsim's record on every judge point that ran speculative decoding (MTP), on any GPU: InferenceX's
    pull-request baselines with a draft (`points`, as `vendor_records` takes them: TPOT for tok/s/user, TTFT) and
    NVIDIA's one-user trtllm-bench MTP runs (`one_user`: `trtllm_bench.min_latency()["points"]`, OSL / E2E for
    tok/s/user). The calibration replay has no drafting row, so this is the only record of the acceptance, verify
    and round-overhead mechanisms; a GPU answer with drafts shows bands no narrower than it (`engine.bands.band_for`).
    {} when no judge drafted."""
    by_metric: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for p in points:
        if p.get("pred_tpot_s") is None or p.get("spec", "none") == "none":
            continue
        for metric, err in _judge_errors(p):
            by_metric[metric].append((p["id"], err))
    for p in one_user:
        by_metric["tok_s_user"].append((p["id"], p["err_pct"]))
    if not by_metric:
        return {}
    return {"data": "every judge point that drafted (InferenceX pull-request baselines with MTP; NVIDIA's one-user "
                    "trtllm-bench MTP runs), priced at its stated draft length; judges, never fitted",
            "metrics": {m: _judge_record(pairs) for m, pairs in sorted(by_metric.items())}}


def published_points(path: str | None = None) -> list[dict]:
    """The packaged published points of the SRAM machines, with their conditions and sources."""
    with open(path or _data("published_points.csv"), newline="") as fh:
        return list(csv.DictReader(fh))


def mlperf_points(path: str | None = None) -> list[dict]:
    """The packaged MLPerf Inference Offline results, v5.0 to v6.1 (published points with their sources)."""
    with open(path or _data("mlperf_v51_offline.csv"), newline="") as fh:
        return list(csv.DictReader(fh))


OFFLINE_TP = (1, 2, 4, 8)  # tensor-parallel sizes tried per replica (a submitter tunes the layout)


def _offline_best(p: dict, mix) -> tuple[int, float, float]:
    """(tp, saturated tok/s per GPU, closed-loop tok/s per GPU) of the best layout that fits for one point whose
    lengths are `mix` (`point_lengths`)."""
    from lpxsim.engine.offline import closed_loop_ceiling, offline_throughput
    from lpxsim.gpu.step import GpuStepModel

    isl, osl, gpus = _point_isl(p, mix), int(p["osl"]), int(p["gpus"])
    context = mix.resident_context() if mix is not None else None
    best = (0, -1.0, math.nan)
    for tp in OFFLINE_TP:
        if gpus % tp:
            continue
        try:
            m = GpuStepModel(p["model"], p["system"], tp=tp, weights=p["weights"], kv=p["kv"],
                             framework=p["framework"], release=row_release(p))
            sat = offline_throughput(m, isl, osl, context=context).output_tok_s_per_chip
        except UserError:  # the weights or one sequence's KV do not fit at this TP
            continue
        if sat > best[1]:
            best = (tp, sat, closed_loop_ceiling(m, isl, osl))
    if best[0] == 0:
        raise UserError("model", f"{p['model']} fits no tensor-parallel layout of {p['system']}")
    return best


def _stated(p: dict) -> bool:
    """Whether a point states the submission's layout (the optional columns tp .. kv_mem_fraction)."""
    return all((p.get(k) or "").strip() for k in ("tp", "pp", "ep", "dp_attention", "max_batch_per_rank",
                                                   "kv_mem_fraction"))


def _offline_stated(p: dict, mix) -> tuple[str, float, float]:
    """(layout label, predicted tok/s per GPU, steady-state tok/s per GPU) at the layout and caps the submission
    states: tensor, pipeline and expert parallelism, attention data-parallelism, the engine's batch cap and the
    share of free memory given to the KV cache. TensorRT-LLM's `max_batch_size` is per attention-DP rank (each
    rank runs its own scheduler) and its capacity scheduler admits `max_batch_size` x pp (one micro-batch a
    stage): TRT-BATCH. `max_num_tokens` is an iteration budget prompts and decodes share (TensorRT-LLM);
    `reserve_tokens` the KV a request reserves when admitted (TensorRT-LLM's GUARANTEED_NO_EVICT, as trtllm-bench
    runs it: prompt + output; blank where the run takes KV as it grows, MAX_UTILIZATION: `offline.saturated_batch`);
    `prefill_pass_tokens` the prompt tokens one prefill pass of its own packs (vLLM with chunked prefill off:
    its `max_num_batched_tokens`); `cuda_graphs` false where the run states it ran its decode steps without CUDA
    graphs (NVIDIA's harness `use_graphs: False`, vLLM's `enforce_eager`). Where the point names its dataset and
    LoadGen's sample count, the prediction is the finite run (`engine.offline_run`) of each replica's share of
    the samples; else the steady state."""
    from lpxsim.engine.offline import offline_throughput
    from lpxsim.engine.offline_run import offline_run
    from lpxsim.gpu.layout import Layout
    from lpxsim.gpu.step import GpuStepModel

    tp, pp, ep = int(p["tp"]), int(p["pp"]), int(p["ep"])
    dp = _flag(p, "dp_attention", default=False)
    lay = Layout(tp=tp, ep=ep, pp=pp, dp_attention=dp)
    graphs = _flag(p, "cuda_graphs", default=True)
    m = GpuStepModel(p["model"], p["system"], tp=tp, pp=pp, ep=ep, dp_attention=dp, weights=p["weights"],
                     kv=p["kv"], framework=p["framework"], mem_fraction=float(p["kv_mem_fraction"]),
                     max_batch=int(p["max_batch_per_rank"]) * lay.attention_ranks * pp, cuda_graphs=graphs,
                     release=row_release(p))
    budget = _optional_int(p, "max_num_tokens")
    per_pass = _optional_int(p, "prefill_pass_tokens")
    concurrency = _optional_int(p, "max_concurrency")
    samples = _optional_int(p, "samples_per_query")
    reserve = _optional_int(p, "reserve_tokens")
    if mix is not None and samples is not None:
        replicas = max(1, int(p["gpus"]) // (tp * pp))
        per_replica = math.ceil(generated_samples(samples, mix.samples) / replicas)
        run = offline_run(m, mix, per_replica, tokens_per_pass=per_pass, iteration_tokens=budget,
                          concurrency=concurrency, reserve_tokens=reserve)
        return m.layout.label(), run.output_tok_s_per_chip, run.steady.output_tok_s_per_chip
    context = mix.resident_context() if mix is not None else None
    sat = offline_throughput(m, _point_isl(p, mix), int(p["osl"]), tokens_per_pass=per_pass, iteration_tokens=budget,
                             context=context, concurrency=concurrency,
                             reserve_tokens=reserve).output_tok_s_per_chip
    return m.layout.label(), sat, sat


def _optional_int(p: dict, key: str) -> int | None:
    v = (p.get(key) or "").strip()
    return int(v) if v else None


def _flag(p: dict, key: str, default: bool) -> bool:
    """A point's true/false column ("true" or "1" is true), `default` where it is blank."""
    v = (p.get(key) or "").strip().lower()
    return v in ("true", "1") if v else default


# MLPerf Inference fixes each benchmark's dataset and output limit: the packaged per-sample lengths
# (data/measured/mlperf_datasets, MLPERF-DS-*) and the most output tokens a sample may have (MLC-51-CFG;
# MLPERF-DS-DSR1 for DeepSeek-R1's 20K). A point that names neither gets its model's.
MLPERF_DATASETS = {"llama-2-70b": ("llama-2-70b", 1024), "llama-3.1-405b": ("llama-3.1-405b", 2000),
                   "deepseek-r1": ("deepseek-r1", 20000), "llama-3.1-8b": ("llama-3.1-8b", 128)}


UNIFORM = "uniform"  # a point's dataset of one prompt and one output length


def point_lengths(p: dict):
    """The `engine.lengths.LengthMix` of an MLPerf point: its dataset's prompts, the outputs' shape at the point's
    mean output length (what its run wrote: `osl`) under the benchmark's output cap. The dataset
    and cap are the point's own where stated, else its benchmark's (`MLPERF_DATASETS`); None for a model
    MLPerf has no packaged dataset of. A point whose dataset is "uniform" (a synthetic run of one prompt and one
    output length, e.g. trtllm-bench's `token-norm-dist` at zero spread) is priced at its `isl` and `osl`."""
    from lpxsim.engine.lengths import dataset, uniform

    name = (p.get("dataset") or "").strip()
    if name == UNIFORM:
        return uniform(int(p["isl"]), int(p["osl"]))
    default_name, default_cap = MLPERF_DATASETS.get(p.get("model", ""), (None, None))
    name = name or default_name
    if not name:
        return None
    cap = _optional_int(p, "max_osl") or (default_cap if name == default_name else None)
    return dataset(name).shaped(float(p["osl"]), cap)


def _point_isl(p: dict, mix) -> int:
    """The mean prompt a point is priced at: its dataset's where it has one, else the point's `isl`."""
    return max(1, round(mix.mean_isl)) if mix is not None else int(p["isl"])


def generated_samples(requested: int, dataset_size: int) -> int:
    """Samples LoadGen issues for a requested count when it concatenates random permutations of the dataset
    (`sample_concatenate_permutation`): the next whole number of permutations (MLC-51-LOG: 396,000 requested,
    399,308 = 91 x 4,388 issued)."""
    return math.ceil(requested / dataset_size) * dataset_size


def mlperf_offline(points: list[dict]) -> dict:
    """Each MLPerf Offline point against the saturated-regime prediction, with the median absolute error, MAPE
    and signed median of each column.

    The headline (`saturated`) prices a point at the layout its submission states, where the point states one
    (the conditions are known), else at the best tensor-parallel layout that fits, and runs LoadGen's finite
    query where the point names its dataset and sample count; `steady` is the endless queue at the same layout,
    `best_layout` the best tensor-parallel layout's steady state for every point (what lpxsim would pick),
    `closed_loop` the closed loop's ceiling."""
    rows, sat_err, steady_err, best_err, closed_err = [], [], [], [], []
    for p in points:
        mix = point_lengths(p)
        tp, best, closed = _offline_best(p, mix)
        label, sat, steady = _offline_stated(p, mix) if _stated(p) else (f"TP{tp} (best)", best, best)
        pub = float(p["tok_s_per_gpu"])
        rows.append({"id": p["id"], "system": p["system"], "model": p["model"], "gpus": int(p["gpus"]), "tp": tp,
                     "layout": label, "isl": _point_isl(p, mix), "osl": int(p["osl"]),
                     "published_tok_s_per_gpu": pub,
                     "predicted_tok_s_per_gpu": round(sat, 1), "err_pct": round(_pct(sat, pub), 1),
                     "steady_tok_s_per_gpu": round(steady, 1), "steady_err_pct": round(_pct(steady, pub), 1),
                     "best_layout_tok_s_per_gpu": round(best, 1), "best_layout_err_pct": round(_pct(best, pub), 1),
                     "closed_loop_tok_s_per_gpu": round(closed, 1),
                     "closed_loop_err_pct": round(_pct(closed, pub), 1), "source": p["source"]})
        sat_err.append(_pct(sat, pub))
        steady_err.append(_pct(steady, pub))
        best_err.append(_pct(best, pub))
        closed_err.append(_pct(closed, pub))
    return {"points": rows, "saturated": error_stats(sat_err).as_row(), "steady": error_stats(steady_err).as_row(),
            "best_layout": error_stats(best_err).as_row(), "closed_loop": error_stats(closed_err).as_row()}


def run_throughput_factor(conc: int, prompts_per_user: int = PROMPTS_PER_USER) -> float:
    """Measured / steady-state output throughput of the benchmark's finite run.

    InferenceX sends `prompts_per_user` x C requests through C concurrent clients and divides the output
    tokens by the run's wall time, which ends when the last request does. The clients' last requests,
    desynchronised over one request cycle, end spread over it: the last of C ends (C - 1) / (2 (C + 1))
    cycles after their mean. The run lasts prompts_per_user + that tail for prompts_per_user cycles of work.
    """
    return prompts_per_user / (prompts_per_user + (conc - 1) / (2.0 * (conc + 1)))


def _pct(pred: float, meas: str | float) -> float | None:
    try:
        m = float(meas)
    except (TypeError, ValueError):
        return None
    return 100.0 * (pred / m - 1.0) if m > 0 and math.isfinite(pred) else None


def row_release(r: dict) -> str:
    """The engine release a measured row is priced with: the release in effect on its `date`
    (`gpu.engine.release_month`), the pooled fit where it states none (assumption "engine-release")."""
    from lpxsim.core.frameworks import POOLED

    return (r.get("date") or "").strip() or POOLED


def step_model(r: dict, project: bool, cache: dict):
    """The replay's step model of calibration row `r` (its GPU, engine, precision, layout and KV format, and the
    engine release of its date: `row_release`), memoised in `cache`; `project`: priced from the sibling GPU's
    tables (`PROJECT_FROM`)."""
    from lpxsim.gpu.calibration import kv_format
    from lpxsim.gpu.engine import engine_params
    from lpxsim.gpu.step import GpuStepModel

    fw = {"trt": "trtllm"}.get(r["framework"], r["framework"])
    dp = r["dp_attention"].lower() in ("true", "1")
    system = SYSTEMS[r["hardware"]]
    release = engine_params(fw, row_release(r)).release  # rows of one release share a model
    key = (system, fw, r["precision"], int(r["tp"]), int(r["ep"]), dp, project, release)
    if key not in cache:
        tp = int(r["tp"])
        cache[key] = GpuStepModel("deepseek-r1", system, gpus=tp, tp=tp, ep=int(r["ep"]), dp_attention=dp,
                                  weights=r["precision"], kv=kv_format(r["hardware"], r["framework"]), framework=fw,
                                  project_from=PROJECT_FROM[system] if project else None, release=release)
    return cache[key]


KV_SKIP = "their KV does not fit at that layout"  # the replay's skip reasons (`gpu_replay`)
WEIGHTS_SKIP = "the weights do not fit at that layout"


def replay_row(r: dict, project: bool = False, cache: dict | None = None) -> dict | None:
    """Predicted TPOT, TTFT and output tok/s per GPU of one calibration row (None: it cannot be priced at its
    layout, e.g. its KV does not fit; `priced_row` says why)."""
    return priced_row(r, project, cache)[0]


def priced_row(r: dict, project: bool = False, cache: dict | None = None) -> tuple[dict | None, str | None]:
    """`replay_row`'s prediction, or None and the reason the row's layout cannot price it (KV_SKIP,
    WEIGHTS_SKIP, else the engine's own one-line error). A row quoting mean latencies (`latency_statistic`) is
    given the mean TTFT of the benchmark's simulated run (`mean_run_ttft_s`), its start-up burst included; every
    other figure is the steady state's."""
    from lpxsim.core.errors import DoesNotFit, UserError
    from lpxsim.engine.steady_state import steady_state

    cache = {} if cache is None else cache
    isl, osl = round(LENGTH_RATIO * int(r["isl"])), round(LENGTH_RATIO * int(r["osl"]))
    k = int(r.get("spec_draft_tokens") or 0) if (r.get("spec_method") or "none") != "none" else 0
    accept: tuple[float, ...] | float = 0.0
    if k:  # the rows are InferenceX runs: random prompts in the chat template (IX-649, specs.mtp.CONDITION_ACCEPT)
        from lpxsim.catalog import get_model
        from lpxsim.engine.inferencex_launch import CONDITIONS
        from lpxsim.specs.mtp import condition_accept

        accept = condition_accept(get_model("deepseek-r1"), CONDITIONS)[0]
    if _flag(r, "disagg", default=False):
        return _priced_disaggregated(r, project, cache, k, accept)
    try:
        step = step_model(r, project, cache)
        e = steady_state(step, isl=isl, osl=osl, concurrency=int(r["conc"]), spec_k=k, spec_accept=accept)
    except DoesNotFit:
        return None, WEIGHTS_SKIP
    except UserError as err:
        return None, KV_SKIP if err.field == "concurrency" else f"{err.field}: {err.message}"
    # one user has no start-up burst: its run is its steady state (tests/test_benchmark_run.py), so it is not simulated
    run_mean = r.get("latency_statistic") == "mean" and int(r["conc"]) > 1
    ttft = mean_run_ttft_s(r, step, k, accept) if run_mean else e.ttft_s
    return {"tpot_s": e.tpot_s, "ttft_s": ttft, "steady_ttft_s": e.ttft_s, "decode_step_s": e.decode_period_s,
            "output_tok_s_per_gpu": e.output_tok_s_per_chip * run_throughput_factor(int(r["conc"]))}, None


def _pool_row(r: dict, side: str) -> dict:
    """Disaggregated row `r` as the aggregated row of its `side` ("prefill" or "decode") pool's layout."""
    return dict(r, tp=r[f"{side}_tp"], ep=r[f"{side}_ep"], dp_attention=r[f"{side}_dp_attention"])


def _decode_cap(r: dict) -> int | None:
    """A disaggregated row's stated cap on one decode worker's running sequences: `decode_max_batch` (a rank's, as
    TensorRT-LLM's `max_batch_size`) times its attention-DP ranks; None where the row states none."""
    cap = (r.get(DECODE_CAP_COLUMN) or "").strip()
    if not cap:
        return None
    ranks = int(r["decode_tp"]) if _flag(r, "decode_dp_attention", default=False) else 1
    return int(cap) * ranks


def kv_link(system: str, gpus: int, sender_gpus: int) -> tuple[float, float, str]:
    """(bytes/s, one-way latency, kind) of the link a disaggregated deployment of `gpus` GPUs of `system` sends a
    prompt's KV over, from one prefill worker of `sender_gpus` GPUs: the fabric a collective over the whole
    deployment would run on (`gpu.collectives.fabric_for`: NVLink inside one scale-up domain, else the scale-out
    network), each sending GPU at that fabric's effective per-GPU bandwidth, its latency the fabric's alpha
    (assumption "disagg-kv-link")."""
    from lpxsim.catalog import get_system
    from lpxsim.gpu.collectives import fabric_for

    fabric = fabric_for(get_system(system), gpus)
    return fabric.bw_Bps * sender_gpus, fabric.alpha_s, "nvlink" if fabric.name == "scale-up" else "infiniband"


def _priced_disaggregated(r: dict, project: bool, cache: dict, k: int,
                          accept: tuple[float, ...] | float) -> tuple[dict | None, str | None]:
    """`priced_row` of a disaggregated row: its benchmark run on the simulator's prefill and decode pools, each at
    its own layout (`engine.benchmark_run.disaggregated_run`); TPOT and TTFT are the run's statistic of the row's
    kind (median or mean), the throughput the run's output tokens over its makespan and its decode GPUs (as
    InferenceX normalises a disaggregated row's output throughput)."""
    from lpxsim.core import progress
    from lpxsim.core.errors import DoesNotFit, UserError
    from lpxsim.engine.benchmark_run import PoolLayout, disaggregated_run

    system = SYSTEMS[r["hardware"]]
    pools = {}
    try:
        for side in ("prefill", "decode"):
            pools[side] = PoolLayout(step_model(_pool_row(r, side), project, cache), int(r[f"{side}_tp"]),
                                     int(r[f"{side}_workers"]), _decode_cap(r) if side == "decode" else None)
        gpus = sum(p.gpus * p.workers for p in pools.values())
        link_Bps, link_s, kind = kv_link(system, gpus, pools["prefill"].gpus)
        label = (f"simulating a disaggregated run: {r['hardware']} prefill {r['prefill_tp']} x {r['prefill_workers']}, "
                 f"decode {r['decode_tp']} x {r['decode_workers']}, {int(r['conc']):,} users")
        with progress.stage(label):
            lat, out_tok_s = disaggregated_run(pools["prefill"], pools["decode"], system, "deepseek-r1",
                                               int(r["isl"]), int(r["osl"]), int(r["conc"]), PROMPTS_PER_USER,
                                               link_Bps, link_s, kind, k, accept)
    except DoesNotFit:
        return None, WEIGHTS_SKIP
    except UserError as err:
        return None, KV_SKIP if err.field == "concurrency" else f"{err.field}: {err.message}"
    mean = r.get("latency_statistic") == "mean"
    ttft = lat.ttft_mean_s if mean else lat.ttft_median_s
    # InferenceX divides a disaggregated run's output tokens by its decode GPUs (and its input tokens by its prefill
    # GPUs): its output_tput_per_gpu x num_decode_gpu is the users' decode rate, C / TPOT
    decode_gpus = pools["decode"].gpus * pools["decode"].workers
    return {"tpot_s": lat.tpot_mean_s if mean else lat.tpot_median_s, "ttft_s": ttft, "steady_ttft_s": ttft,
            "output_tok_s_per_gpu": out_tok_s / decode_gpus}, None


def row_run(r: dict, step: StepModel, spec_k: int = 0,
            spec_accept: tuple[float, ...] | float = ()) -> RunLatencies:
    """Row `r`'s benchmark run as its client runs it (`engine.benchmark_run.benchmark_run`: PROMPTS_PER_USER requests
    a user, the first of every user arriving at once), on `step`: its mean and median TTFT and TPOT."""
    from lpxsim.engine.benchmark_run import benchmark_run

    return benchmark_run(step, SYSTEMS[r["hardware"]], "deepseek-r1", int(r["tp"]), int(r["isl"]), int(r["osl"]),
                         int(r["conc"]), PROMPTS_PER_USER, spec_k, spec_accept)


def mean_run_ttft_s(r: dict, step: StepModel, spec_k: int = 0, spec_accept: tuple[float, ...] | float = ()) -> float:
    """The mean TTFT over row `r`'s benchmark run (`row_run`), on `step`."""
    return row_run(r, step, spec_k, spec_accept).ttft_mean_s


ATTENTION_DP_GROUP = "attention=DP"  # the replay group of the rows that run attention data-parallel


def _groups(r: dict) -> list[str]:
    c = int(r["conc"])
    spec = r.get("spec_method") or "none"
    by_spec = [f"spec={spec} k={r['spec_draft_tokens']}"] if spec != "none" else []  # user rows only
    attention = ATTENTION_DP_GROUP if _flag(r, "dp_attention", default=False) else "attention=TP"
    by_spec += [DISAGGREGATED_GROUP] if _flag(r, "disagg", default=False) else []  # user rows only
    return ["all", *by_spec, f"gpu={r['hardware']}", f"framework={r['framework']}", f"precision={r['precision']}",
            f"gpu+precision={r['hardware']} {r['precision']}", attention, "conc=1" if c == 1 else "conc 2-64"
            if c <= 64 else "conc>=128" if c >= 128 else "conc 65-127"]


TTFT_BUCKETS = ("1", "2-8", "16-64", ">=128")  # one user; low concurrency; loaded; saturated


def ttft_bucket(conc: int) -> str:
    """The concurrency bucket of the first-token tables (TTFT_BUCKETS; 65-127 counts as loaded)."""
    return "1" if conc <= 1 else "2-8" if conc <= 8 else "16-64" if conc < 128 else ">=128"


def gpu_replay(rows: list[dict], project: bool = False, priced: list[tuple] | None = None) -> dict:
    """Per-group error statistics of TPOT, tok/s per user, TTFT and output tok/s per GPU over the rows, and
    TTFT's per configuration (GPU, framework, precision) and concurrency bucket (`ttft_bucket`), and per configuration
    the decode step alone against the rows' inter-token latency (`measured_decode_step_s`). `priced`: each
    row's `priced_row` result where the caller already has them (not priced again)."""
    cache: dict = {}
    errs: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    ttft: dict[tuple[str, str], list[float]] = defaultdict(list)
    # decode step alone (`measured_decode_step_s`): per configuration, each row's % errors and TPOT-over-step shares
    steps: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    skipped: dict[str, int] = defaultdict(int)
    for i, r in enumerate(rows):
        if project and SYSTEMS[r["hardware"]] not in PROJECT_FROM:
            continue
        p, why = priced[i] if priced is not None else priced_row(r, project, cache)
        if p is None:
            skipped[why or KV_SKIP] += 1
            continue
        flagged = r.get("flag_intvty_vs_n_gpus_gt15pct", "0") in ("1", "1.0")
        stat = r.get("latency_statistic", "median")  # InferenceX's pull-request tables quote means
        tpot = float(r[f"tpot_{stat}_s"])
        found = {"tpot": _pct(p["tpot_s"], tpot), "tok_s_user": _pct(1.0 / p["tpot_s"], 1.0 / tpot),
                 "ttft": _pct(p["ttft_s"], r[f"ttft_{stat}_s"]),
                 # a benchmark artefact in the throughput of flagged rows only (data README)
                 "tok_s_per_chip": None if flagged else _pct(p["output_tok_s_per_gpu"], r.get("output_tput_per_gpu"))}
        for g in _groups(r):
            for k, v in found.items():
                if v is not None:
                    errs[g][k].append(v)
        if found["ttft"] is not None:
            ttft[(f"{r['hardware']} {r['framework']} {r['precision']}", ttft_bucket(int(r["conc"])))].append(found["ttft"])
        step = measured_decode_step_s(r) if stat == "median" else None  # a median ITL beside a median TPOT
        if step is not None and "decode_step_s" in p:
            cfg = steps[f"{r['hardware']} {r['framework']} {r['precision']}"]
            cfg["step"].append(_pct(p["decode_step_s"], step))
            cfg["tpot"].append(found["tpot"])
            cfg["measured"].append(100.0 * (tpot / step - 1.0))
            cfg["predicted"].append(100.0 * (p["tpot_s"] / p["decode_step_s"] - 1.0))
    table = {g: {k: error_stats(v).as_row() for k, v in d.items()} for g, d in sorted(errs.items())}
    by_conc = [{"config": c, "conc": b, **error_stats(v).as_row()}
               for (c, b), v in sorted(ttft.items(), key=lambda kv: (kv[0][0], TTFT_BUCKETS.index(kv[0][1])))]
    return {"groups": table, "ttft_by_config": by_conc, "decode_step_by_config": _step_table(steps),
            "skipped_kv_does_not_fit": skipped.get(KV_SKIP, 0), "skipped": dict(skipped)}


def measured_decode_step_s(r: dict) -> float | None:
    """One decode step of row `r` without the prefills that interrupt it: its median inter-token latency over
    the tokens a streamed chunk carries under its launch (`inferencex_launch.launch_stream_interval`); None for
    a speculative row (a step there yields several tokens), a row without a median inter-token latency, a
    launch whose stream interval was not read, or a row whose median chunk is likely to hold another user's
    prefill: the other users start (conc - 1) requests in one request's decode of ~osl steps, so a chunk of S
    steps holds (conc - 1) S / osl prefills on average, and only while that mean is at most ln 2 is a chunk
    more likely than not to hold none (prefills falling at random over the decode)."""
    from lpxsim.engine.inferencex_launch import launch_stream_interval

    if (r.get("spec_method") or "none") != "none" or not (r.get("itl_median_s") or "").strip():
        return None
    tokens = launch_stream_interval(r["hardware"], r["framework"], r["precision"])
    itl = float(r["itl_median_s"])
    if not tokens or itl <= 0:
        return None
    prefills_per_chunk = (int(r["conc"]) - 1) * tokens / (LENGTH_RATIO * int(r["osl"]))
    return itl / tokens if prefills_per_chunk <= math.log(2) else None


def _step_table(steps: dict[str, dict[str, list[float]]]) -> list[dict]:
    """Per configuration: the decode step's error against the measured one, the same rows' TPOT error, and the
    median share TPOT adds to the step (the other users' prefills), measured and predicted."""
    return [{"config": cfg, "step": error_stats(v["step"]).as_row(), "tpot": error_stats(v["tpot"]).as_row(),
             "interruptions_measured_pct": round(statistics.median(v["measured"]), 1),
             "interruptions_predicted_pct": round(statistics.median(v["predicted"]), 1)}
            for cfg, v in sorted(steps.items())]


def ttft_date_spread(rows: list[dict], max_conc: int = 8) -> list[dict]:
    """Measured TTFT of one configuration across its dated runs at concurrency <= `max_conc`: the software
    date's drift, which the model does not fit (min, median, max and max / min - 1, with the dates of the
    extremes). Only configurations with at least two runs."""
    import statistics

    runs: dict[tuple, list[tuple[float, str]]] = defaultdict(list)
    for r in rows:
        if int(r["conc"]) <= max_conc and r.get("ttft_median_s"):
            key = (r["hardware"], r["framework"], r["precision"], int(r["tp"]), int(r["ep"]),
                   r["dp_attention"].lower() in ("true", "1"), int(r["isl"]), int(r["osl"]), int(r["conc"]))
            runs[key].append((float(r["ttft_median_s"]), r.get("date", "")))
    out = []
    for key, v in sorted(runs.items()):
        if len(v) < 2:
            continue
        v.sort()
        out.append({"hardware": key[0], "framework": key[1], "precision": key[2], "tp": key[3], "ep": key[4],
                    "dp_attention": key[5], "isl": key[6], "osl": key[7], "conc": key[8], "runs": len(v),
                    "min_s": v[0][0], "min_date": v[0][1], "median_s": statistics.median(t for t, _ in v),
                    "max_s": v[-1][0], "max_date": v[-1][1], "spread_pct": 100.0 * (v[-1][0] / v[0][0] - 1.0)})
    return out


def projection_pairs() -> list[dict]:
    """Step-level error of the projection rule: each measured GPU priced from its sibling's tables vs its own
    (DeepSeek-R1 fp8 TP8 SGLang; decode at batch 1-128 x context 1k/8k, prefill 1k/8k)."""
    from lpxsim.gpu.step import GpuStepModel
    from lpxsim.step.protocol import DecodeBatch, PrefillChunk

    out = []
    for src, dst in PROJECTION_PAIRS:
        real = GpuStepModel("deepseek-r1", dst, tp=8, weights="fp8")
        proj = GpuStepModel("deepseek-r1", dst, tp=8, weights="fp8", project_from=src)
        errs = []
        for b in (1, 8, 32, 128):
            for ctx in (1024, 8192):
                batch = DecodeBatch.uniform(b, ctx)
                errs.append(_pct(proj.decode_step(batch).latency_s, real.decode_step(batch).latency_s))
        for n in (1024, 8192):
            errs.append(_pct(proj.prefill(PrefillChunk(n)).interval_s, real.prefill(PrefillChunk(n)).interval_s))
        out.append({"from": src, "to": dst, **error_stats(errs).as_row()})
    return out


def sram_points(points: list[dict]) -> list[dict]:
    """Each published LPX / first-gen Groq / Cerebras point with its batch-1 prediction, its predicted range
    (`engine.sram_range`: dedicated batch-1 down to the loaded ceiling with the host path) and the error used
    for the band (see `_band_error`)."""
    from lpxsim.engine.sram_range import implied_host_s, predicted_range

    out = []
    for p in points:
        r = predicted_range(p)
        val = float(p["value"])
        row = {k: p[k] for k in ("id", "path", "system", "model", "role", "endpoint", "spec_decoding",
                                 "software_date", "source")} | {"published": val} | r
        row["batch1_err_pct"] = round(_pct(r["batch1_tok_s_user"], val), 1)
        row["implied_host_us"] = round(1e6 * implied_host_s(val, r["batch1_tok_s_user"]), 1)
        row["inside_range"] = r["low_tok_s_user"] <= val <= r["high_tok_s_user"] * (1 + 1e-9)
        # where the conditions are known (a vendor-run point, not a shared endpoint) the judge is the error itself,
        # not the range: the range's top is the batch-1 answer, so a figure 2 % above it read as a miss
        row["within_known_tolerance"] = (abs(row["batch1_err_pct"]) <= KNOWN_CONDITIONS_TOLERANCE_PCT
                                         if p["role"] == "predict" else None)
        row["band_err_pct"] = _band_error(p["role"], val, r)
        out.append(row)
    return out


def _band_error(role: str, value: float, r: dict) -> float | None:
    """The error a published point contributes to its path's band: the default answer (a dedicated batch-1
    stream on the device, no host path, no speculation: what `estimate` prints) against the figure.

    The band decorates that answer, so it says how far a served figure has been from it. A range point that
    falls inside its predicted range is explained by the range's mechanisms (load, host path, speculation),
    not predicted by the answer: scoring it 0 would print a band of +-0 % next to an answer 7x off a served
    figure. The range check is reported beside (`inside_range`). A fit point (the one LPX residual)
    contributes nothing: it is where the prediction was pinned.
    """
    if role == "fit":
        return None
    return round(_pct(r["batch1_tok_s_user"], value), 2)


def _no_narrower(stats: dict, floor: dict) -> dict:
    """`stats` with its shown band widened to at least `floor`'s (the statistics themselves unchanged)."""
    return {**stats, "band_pct": max(stats["band_pct"], floor["band_pct"])}


def bands(gpu: dict, projected: dict, sram: list[dict]) -> dict:
    """The per-path, per-metric error statistics the answers' bands are read from (`engine.bands.band_for`)."""
    out = {
        "measured-gpu": {"data": "InferenceX DeepSeek-R1 calibration rows (H200, B200; SGLang, TRT-LLM; fp8, "
                                 "fp4), replayed in-sample (the engine overheads are fitted on them)",
                         "metrics": {k: gpu["groups"]["all"][k] for k in ("tok_s_user", "ttft", "tok_s_per_chip")}},
        "projected-gpu": {"data": "the same rows with H200 priced from H100's tables and B200 from B300's "
                                  "(achieved-rate projection with the kernel floor carried over, "
                                  "gpu/projection.py); NVIDIA siblings only: no AMD measurement is in the "
                                  "calibration set, so a cross-vendor projection's error is not validated here; "
                                  "the band shown is never narrower than the measured path's (a projection is "
                                  "priced from measured kernels, so it is no more certain than they are)",
                          "metrics": {k: _no_narrower(projected["groups"]["all"][k], gpu["groups"]["all"][k])
                                      for k in ("tok_s_user", "ttft", "tok_s_per_chip")}},
    }
    for path in ("compiled-lpx", "wafer-scale"):
        pts = [p for p in sram if p["path"] == path and p["band_err_pct"] is not None]
        out[path] = {"data": "published points " + ", ".join(p["id"] for p in pts)
                     + " (data/measured/published_points.csv; each point's dedicated batch-1 answer against the figure)",
                     "metrics": {"tok_s_user": error_stats([p["band_err_pct"] for p in pts]).as_row()}}
    assert set(out) == set(PATHS)
    return out


def stated_attention_dp_ids(points: list[dict]) -> set[str]:
    """The ids of the saturated points (MLPerf's columns) whose stated layout runs attention data-parallel."""
    return {p["id"] for p in points if _stated(p) and _flag(p, "dp_attention", default=False)}


def layout_bands(gpu: dict, projected: dict, saturated: dict[str, float], rows: list[dict]) -> dict:
    """The error record of GPU answers whose layout runs attention data-parallel, where it has one: the replay
    group of the calibration rows that do (`ATTENTION_DP_GROUP`, per GPU path, the projected one no narrower
    than the measured one) and the saturated runs whose stated layout does (`saturated`: id -> signed error in
    percent; MLPerf Offline points and NVIDIA's trtllm-bench runs).

    Attention-DP is the one layout feature the calibration rows split on whose error differs from the path's:
    each rank schedules its own batch and every step waits for the busiest rank (TRT-ADP-BLOG), which the
    path's band, over all rows, does not show. `rows`: the replayed rows (to name the record's data).
    {} when the rows hold none."""
    measured = gpu["groups"].get(ATTENTION_DP_GROUP)
    if not measured:
        return {}
    proj = projected["groups"].get(ATTENTION_DP_GROUP, measured)
    metrics = [k for k in ("tok_s_user", "ttft", "tok_s_per_chip") if k in measured]
    errs = list(saturated.values())
    dp_rows = [r for r in rows if _flag(r, "dp_attention", default=False)]
    engines = "/".join(sorted({r["framework"] for r in dp_rows}))
    gpus = "/".join(sorted({r["hardware"] for r in dp_rows}))
    entry = {"data": f"the calibration rows that run attention data-parallel ({engines} on {gpus}), replayed like "
                     "the path's; the saturated runs (MLPerf Offline, trtllm-bench) whose stated layout does",
             "paths": {"measured-gpu": {"metrics": {k: measured[k] for k in metrics}},
                       "projected-gpu": {"metrics": {k: _no_narrower(proj[k], measured[k]) for k in metrics}}}}
    if errs:
        entry["offline"] = {"points": sorted(saturated), **error_stats(errs).as_row(),
                            "min_signed_pct": round(min(errs), 1), "max_signed_pct": round(max(errs), 1)}
    return {"attention-dp": entry}


def run(limit: int | None = None) -> dict:
    """Every validation table and the bands (one JSON-able dict)."""
    from lpxsim.engine import trtllm_bench

    rows = calibration_rows()
    calibrated = {r["hardware"] for r in rows}  # the GPUs the replay runs (all of them, whatever `limit` keeps)
    rows = rows[:limit] if limit else rows
    gpu = gpu_replay(rows)
    projected = gpu_replay(rows, project=True)
    sram = sram_points(published_points())
    points = mlperf_points()
    offline = mlperf_offline(points)
    bench_points = trtllm_bench.saturated_points()
    bench = trtllm_bench.saturated(bench_points)
    overview = trtllm_bench.overview()
    stated = stated_attention_dp_ids(points + bench_points)
    adp = {r["id"]: r["err_pct"] for r in offline["points"] + bench["points"] if r["id"] in stated}
    adp |= {r["id"]: r["err_pct"] for r in overview["points"] if r["attention_dp"]}
    baselines = pr_baselines(pr_baseline_rows())
    public = vendor_judges(vendor_judge_rows())
    min_latency = trtllm_bench.min_latency()
    return {"measured_gpu": gpu, "projected_gpu": projected, "projection_pairs": projection_pairs(),
            "ttft_date_spread": ttft_date_spread(rows), "queueing_solvers": queueing_solvers(rows),
            "sram_points": sram, "mlperf_offline": offline, "trtllm_bench_saturated": bench,
            "trtllm_perf_overview": overview, "trtllm_bench_min_latency": min_latency,
            "bands": bands(gpu, projected, sram), "layout_bands": layout_bands(gpu, projected, adp, rows),
            "pr_baselines": baselines, "vendor_judges": public,
            "vendor_records": vendor_records(baselines["points"] + public),
            "system_records": system_records(baselines["points"] + public, calibrated),
            "speculative_record": speculative_record(baselines["points"], min_latency["points"])}
