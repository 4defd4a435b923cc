"""`lpxsim validate`: reproduce docs/validation.md's accuracy tables from the data shipped in the package.

Replays the GPU calibration rows (measured and projected paths; and, where the arrival pattern decides, each
queueing solver: `engine.solver_check`), the projection pairs, the MLPerf Offline results (saturated
throughput; v5.0 to v6.1) and the published points of the SRAM machines, prints each table with its
median absolute error and MAPE, the error band of every cost path and the attention-DP layout's own record.
`--write` regenerates the shipped band file (catalog/fitted/error_bands.json).
"""

from __future__ import annotations

import json
import sys

import typer

from lpxsim.cli.common import emit_json
from lpxsim.cli.validate import path_option
from lpxsim.core import outputs


def _sram_check(p: dict) -> str:
    """The judge of one SRAM point: inside its predicted range where its load is unknown (a shared endpoint),
    the batch-1 error within the tolerance where its conditions are known (a vendor run)."""
    from lpxsim.engine.validation import KNOWN_CONDITIONS_TOLERANCE_PCT

    if p["role"] == "fit":
        return "the fit point"
    if p.get("within_known_tolerance") is None:
        return f"inside range: {'yes' if p['inside_range'] else 'no'}"
    return f"within ±{KNOWN_CONDITIONS_TOLERANCE_PCT:.0f} %: {'yes' if p['within_known_tolerance'] else 'no'}"


def _stats_cells(s: dict | None) -> str:
    if not s or not s.get("n"):
        return "- | - | -"
    return f"{s['median_abs_pct']:.1f} % | {s['mape_pct']:.1f} % | {s['median_signed_pct']:+.1f} %"


def _gpu_table(title: str, res: dict) -> list[str]:
    lines = [f"### {title}", "",
             "| group | rows | TPOT MdAPE | TPOT MAPE | TPOT signed | out tok/s/GPU MdAPE | MAPE | signed "
             "| TTFT MdAPE | MAPE | signed |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for g, d in res["groups"].items():
        lines.append(f"| {g} | {d['tpot']['n']} | {_stats_cells(d.get('tpot'))} | "
                     f"{_stats_cells(d.get('tok_s_per_chip'))} | {_stats_cells(d.get('ttft'))} |")
    lines += ["", f"rows skipped (their KV does not fit at that layout): {res['skipped_kv_does_not_fit']}"]
    from lpxsim.engine.validation import KV_SKIP

    other = {why: n for why, n in res.get("skipped", {}).items() if why != KV_SKIP}
    lines += [f"rows skipped ({why}): {n}" for why, n in sorted(other.items())] + [""]
    return lines


def _ttft_tables(res: dict) -> list[str]:
    lines = ["### First-token time by configuration and concurrency (measured GPU kernels)", "",
             "| GPU framework precision | concurrency | rows | TTFT MdAPE | MAPE | signed |", "|---|---|---|---|---|---|"]
    for c in res["measured_gpu"]["ttft_by_config"]:
        lines.append(f"| {c['config']} | {c['conc']} | {c['n']} | {_stats_cells(c)} |")
    lines += ["", "### The decode step alone: each row's median inter-token latency over the tokens its launch streams "
              "at a time (measured GPU kernels)", "",
              "| GPU framework precision | rows | step MdAPE | MAPE | signed | TPOT MdAPE | MAPE | signed | "
              "TPOT over step, measured (median) | predicted |", "|---|---|---|---|---|---|---|---|---|---|"]
    lines += _step_rows(res["measured_gpu"]["decode_step_by_config"])
    lines += ["", "### Measured TTFT across software dates (concurrency <= 8; not fitted)", "",
              "| configuration | ISL / OSL | conc | runs | min ms (date) | median ms | max ms (date) | max / min |",
              "|---|---|---|---|---|---|---|---|"]
    for d in res["ttft_date_spread"]:
        cfg = (f"{d['hardware']} {d['framework']} {d['precision']} TP{d['tp']} EP{d['ep']}"
               f"{' DP-attn' if d['dp_attention'] else ''}")
        lines.append(f"| {cfg} | {d['isl']:,} / {d['osl']:,} | {d['conc']} | {d['runs']} | {d['min_s'] * 1e3:.0f} "
                     f"({d['min_date']}) | {d['median_s'] * 1e3:.0f} | {d['max_s'] * 1e3:.0f} ({d['max_date']}) | "
                     f"+{d['spread_pct']:.0f} % |")
    return lines + [""]


def _step_rows(by_config: list[dict]) -> list[str]:
    """The decode-step table's rows (`validation.gpu_replay`'s decode_step_by_config)."""
    return [f"| {c['config']} | {c['step']['n']} | {_stats_cells(c['step'])} | {_stats_cells(c['tpot'])} | "
            f"{c['interruptions_measured_pct']:+.1f} % | {c['interruptions_predicted_pct']:+.1f} % |" for c in by_config]


def queueing_table(q: dict) -> list[str]:
    """The queueing solvers' table (`engine.solver_check.queueing_solvers`) as markdown lines."""
    lines = [f"### Queueing: each solver on the {len(q['configurations'])} arrival-sensitive configurations "
             "(a GPU answer is the random-arrival steady state)", "",
             "| solver | TTFT MdAPE | MAPE | signed | TPOT MdAPE | MAPE | signed |", "|---|---|---|---|---|---|---|"]
    for name, d in q["solvers"].items():
        lines.append(f"| {name} | {_stats_cells(d['ttft'])} | {_stats_cells(d['tpot'])} |")
    lines += ["", "| simulator with drawn lengths, by the GPU engine's admission | configurations | TTFT MdAPE | MAPE "
              "| signed |", "|---|---|---|---|---|"]
    for mechanism, d in q["drawn_by_mechanism"].items():
        lines.append(f"| {mechanism} | {d['n']} | {_stats_cells(d)} |")
    return lines + [""]


def offline_table(title: str, off: dict, headline: str) -> list[str]:
    """A saturated-throughput table (`validation.mlperf_offline`'s result) and its summary; `headline` says how the
    headline column priced each point."""
    lines = ["", f"### {title}", "",
             "| id | GPUs | model | layout priced | ISL / OSL | published | predicted (finite run) | error | "
             "steady state | error | best TP layout | error | closed loop | error |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in off["points"]:
        lines.append(f"| {p['id']} | {p['gpus']} | {p['model']} | {p['layout']} | {p['isl']:,} / {p['osl']:,} | "
                     f"{p['published_tok_s_per_gpu']:,.0f} | {p['predicted_tok_s_per_gpu']:,.0f} | {p['err_pct']:+.1f} % | "
                     f"{p['steady_tok_s_per_gpu']:,.0f} | {p['steady_err_pct']:+.1f} % | "
                     f"{p['best_layout_tok_s_per_gpu']:,.0f} (TP{p['tp']}) | {p['best_layout_err_pct']:+.1f} % | "
                     f"{p['closed_loop_tok_s_per_gpu']:,.0f} | {p['closed_loop_err_pct']:+.1f} % |")
    return lines + ["", "| regime | points | MdAPE | MAPE | signed |", "|---|---|---|---|---|",
                    f"| saturated, at {headline} (engine.offline_run) | {off['saturated']['n']} | "
                    f"{_stats_cells(off['saturated'])} |",
                    f"| saturated, at the stated layout, endless queue (engine.offline) | {off['steady']['n']} | "
                    f"{_stats_cells(off['steady'])} |",
                    f"| saturated, at the best tensor-parallel layout | {off['best_layout']['n']} | "
                    f"{_stats_cells(off['best_layout'])} |",
                    f"| closed loop at its largest fitting concurrency | {off['closed_loop']['n']} | "
                    f"{_stats_cells(off['closed_loop'])} |"]


def overview_table(res: dict) -> list[str]:
    """TensorRT-LLM's performance overview (`trtllm_bench.overview`): each run at trtllm-bench's own settings."""
    lines = ["", "### Saturated throughput: TensorRT-LLM's performance overview at trtllm-bench's own settings (output "
             "tok/s per GPU; TRT-PERF-OVERVIEW)", "",
             "| id | model | layout | ISL / OSL | trtllm-bench caps (batch / tokens) | batch run (limit) | published | "
             "predicted | error |", "|---|---|---|---|---|---|---|---|---|"]
    for p in res["points"]:
        lines.append(f"| {p['id']} | {p['model']} | {p['system']} {p['layout']} | {p['isl']:,} / {p['osl']:,} | "
                     f"{p['max_batch_size']:,} / {p['max_num_tokens']:,} | {p['batch']:,} ({p['limited_by']}) | "
                     f"{p['published_tok_s_per_gpu']:,.0f} | {p['predicted_tok_s_per_gpu']:,.0f} | {p['err_pct']:+.1f} % |")
    lines += ["", "| model | runs | MdAPE | MAPE | signed |", "|---|---|---|---|---|"]
    lines += [f"| {m} | {s['n']} | {_stats_cells(s)} |" for m, s in res["by_model"].items()]
    return lines + [f"| all | {res['stats']['n']} | {_stats_cells(res['stats'])} |"]


def min_latency_table(res: dict) -> list[str]:
    """The one-user MTP runs (`trtllm_bench.min_latency`): the engine's OSL / E2E against trtllm-bench's."""
    lines = ["", "### Speculative decoding at one user: NVIDIA's trtllm-bench min-latency runs (OSL / E2E, tok/s; "
             "TRT-BESTPERF)", "",
             "| id | GPUs | layout | MTP k | ISL / OSL | published | predicted | error | tokens a round (default "
             "profile) | without MTP | speed-up credited |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in res["points"]:
        lines.append(f"| {p['id']} | {p['gpus']} {p['system']} | {p['layout']} | {p['mtp']} | "
                     f"{p['isl']:,} / {p['osl']:,} | {p['published_tok_s_user']:,.1f} | "
                     f"{p['predicted_tok_s_user']:,.1f} | {p['err_pct']:+.1f} % | {p['tokens_per_round']:.2f} | "
                     f"{p['no_mtp_tok_s_user']:,.1f} | {p['speedup_credited']:.2f}x |")
    s = res["stats"]
    return lines + ["", "| runs | MdAPE | MAPE | signed |", "|---|---|---|---|", f"| {s['n']} | {_stats_cells(s)} |"]


def pr_baselines_table(res: dict) -> list[str]:
    """InferenceX's pull-request baselines (`validation.pr_baselines`): configurations the calibration set lacks,
    each point beside its prediction, then the replay's groups."""
    lines = ["### Judges outside the calibration set: baselines quoted in InferenceX's own pull requests (mean "
             "latencies; not fitted)", "",
             "Their TTFT is a mean over the benchmark's run, so it is predicted as the mean over that run simulated "
             "as the client runs it, its start-up burst of C simultaneous requests included (`engine.benchmark_run`); "
             "the steady state, the engine's answer, is shown beside it.", "",
             "| id | GPU | precision | spec | layout | ISL / OSL | conc | date | TPOT ms (predicted) | error | "
             "TTFT ms (predicted run mean; steady) | error |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in res["points"]:
        if p["pred_tpot_s"] is None:
            lines.append(f"| {p['id']} | {p['hardware']} | {p['precision']} | {p['spec']} | TP{p['tp']} EP{p['ep']} | "
                         f"{p['isl']:,} / {p['osl']:,} | {p['conc']} | {p['date']} | not priced: {p['skipped']} "
                         "| - | - | - |")
            continue
        lines.append(f"| {p['id']} | {p['hardware']} | {p['precision']} | {p['spec']} | TP{p['tp']} EP{p['ep']} | "
                     f"{p['isl']:,} / {p['osl']:,} | {p['conc']} | {p['date']} | {p['tpot_s'] * 1e3:.2f} "
                     f"({p['pred_tpot_s'] * 1e3:.2f}) | {100 * (p['pred_tpot_s'] / p['tpot_s'] - 1):+.1f} % | "
                     f"{p['ttft_s'] * 1e3:.0f} ({p['pred_ttft_s'] * 1e3:.0f}; {p['pred_steady_ttft_s'] * 1e3:.0f}) | "
                     f"{100 * (p['pred_ttft_s'] / p['ttft_s'] - 1):+.1f} % |")
    return lines + [""] + _gpu_table("Judges outside the calibration set, by group", res["replay"])


def vendor_tables(points: list[dict], records: dict) -> list[str]:
    """A GPU maker's own public serving points beside their predictions (`validation.vendor_judges`), then each
    projected maker's record over all its judge points (`validation.vendor_records`)."""
    lines = ["### Judges outside InferenceX: a GPU maker's own public serving points (median TPOT; not fitted)", "",
             "| id | GPU | precision | layout | ISL / OSL | conc | date | TPOT ms (predicted) | error | tok/s/user error |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for p in points:
        head = (f"| {p['id']} | {p['hardware']} | {p['precision']} | TP{p['tp']} EP{p['ep']} | {p['isl']:,} / "
                f"{p['osl']:,} | {p['conc']} | {p['date']} |")
        if p["pred_tpot_s"] is None:
            lines.append(f"{head} not priced: {p['skipped']} | - | - |")
            continue
        lines.append(f"{head} {p['tpot_s'] * 1e3:.2f} ({p['pred_tpot_s'] * 1e3:.2f}) | "
                     f"{100 * (p['pred_tpot_s'] / p['tpot_s'] - 1):+.1f} % | "
                     f"{100 * (p['tpot_s'] / p['pred_tpot_s'] - 1):+.1f} % |")
    lines += ["", "### Cross-vendor record: every judge point of a projected maker's GPUs (what its answers' bands "
                  "are widened to and quote)", "",
              "| maker | metric | GPU | points | MdAPE | MAPE | signed (median) | range |",
              "|---|---|---|---|---|---|---|---|"]
    for vendor, rec in records.items():
        for metric, m in rec["metrics"].items():
            for gpu, r in [("all", m), *m["gpus"].items()]:
                lines.append(f"| {vendor} | {metric} | {gpu} | {r['n']} | {r['median_abs_pct']:.1f} % | "
                             f"{r['mape_pct']:.1f} % | {r['median_signed_pct']:+.1f} % | "
                             f"{r['min_signed_pct']:+.1f} .. {r['max_signed_pct']:+.1f} % |")
    return lines + [""]


def system_table(records: dict) -> list[str]:
    """Each system outside the calibration set with its own judge points, and lpxsim's record on them
    (`validation.system_records`)."""
    lines = ["### Judged systems: every judge point of a system outside the calibration set (its answers' bands are "
             "no narrower than its record where it has at least 5 points)", "",
             "| system | metric | points | MdAPE | MAPE | signed (median) | range | band (+-) |",
             "|---|---|---|---|---|---|---|---|"]
    for system, rec in records.items():
        for metric, r in rec["metrics"].items():
            lines.append(f"| {system} | {metric} | {r['n']} | {r['median_abs_pct']:.1f} % | {r['mape_pct']:.1f} % | "
                         f"{r['median_signed_pct']:+.1f} % | {r['min_signed_pct']:+.1f} .. "
                         f"{r['max_signed_pct']:+.1f} % | {r['band_pct']:.1f} % |")
    return lines + [""]


def speculative_table(record: dict) -> list[str]:
    """lpxsim's record on every drafting judge point (`validation.speculative_record`)."""
    if not record:
        return []
    lines = ["### Speculative decoding: every judge point that drafted (a GPU answer with drafts shows bands no "
             "narrower than this record where it has at least 5 points)", "",
             "| metric | points | MdAPE | MAPE | signed (median) | range | band (+-) |", "|---|---|---|---|---|---|---|"]
    for metric, r in record["metrics"].items():
        lines.append(f"| {metric} | {r['n']} | {r['median_abs_pct']:.1f} % | {r['mape_pct']:.1f} % | "
                     f"{r['median_signed_pct']:+.1f} % | {r['min_signed_pct']:+.1f} .. {r['max_signed_pct']:+.1f} % "
                     f"| {r['band_pct']:.1f} % |")
    return lines + [""]


def markdown(res: dict) -> str:
    """The tables of a `validation.run()` result as markdown (what `lpxsim validate` prints)."""
    lines = _gpu_table("Measured GPU kernels: InferenceX calibration replay", res["measured_gpu"])
    lines += _ttft_tables(res)
    lines += queueing_table(res["queueing_solvers"])
    lines += _gpu_table("Projected GPU: the same rows priced from a sibling's tables (H200 <- H100, B200 <- B300)",
                        res["projected_gpu"])
    lines += ["### Projection rule, step level (DeepSeek-R1 fp8 TP8 SGLang)", "",
              "| projection | steps | MdAPE | MAPE | signed |", "|---|---|---|---|---|"]
    for p in res["projection_pairs"]:
        lines.append(f"| {p['from']} -> {p['to']} | {p['n']} | {p['median_abs_pct']:.1f} % | {p['mape_pct']:.1f} % "
                     f"| {p['median_signed_pct']:+.1f} % |")
    lines += [""] + pr_baselines_table(res["pr_baselines"])
    lines += vendor_tables(res["vendor_judges"], res["vendor_records"])
    lines += system_table(res["system_records"])
    lines += ["### SRAM machines: published points (tok/s per user)", "",
              "| id | system | model | role | conditions | published | batch-1 (device) | loaded ceiling (users) | "
              "predicted range (loaded + host .. batch-1 [+ spec]) | implied host us/token | batch-1 error | "
              "check | band error |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in res["sram_points"]:
        band = "-" if p["band_err_pct"] is None else f"{p['band_err_pct']:+.1f} %"
        lines.append(f"| {p['id']} | {p['system']} ({p['chips']} chips, {p['stages']} stages) | {p['model']} | "
                     f"{p['role']} | {p['endpoint']}; spec. decoding: {p['spec_decoding']}; {p['software_date']} | "
                     f"{p['published']:,.0f} | {p['batch1_tok_s_user']:,.0f} | {p['kv_full_tok_s_user']:,.0f} "
                     f"({p['loaded_users']}) | {p['low_tok_s_user']:,.0f} .. {p['high_tok_s_user']:,.0f} | "
                     f"{p['implied_host_us']:,.0f} | {p['batch1_err_pct']:+.1f} % | "
                     f"{_sram_check(p)} | {band} |")
    lines += offline_table("Saturated offline throughput: MLPerf Inference Offline, v5.0 to v6.1 (output tok/s per GPU)",
                           res["mlperf_offline"], "the submission's stated layout, LoadGen's finite run")
    lines += offline_table("Saturated throughput: NVIDIA's trtllm-bench DeepSeek-R1 runs (output tok/s per GPU; "
                           "TRT-BESTPERF)", res["trtllm_bench_saturated"], "the run's stated layout and request count")
    lines += overview_table(res["trtllm_perf_overview"])
    lines += min_latency_table(res["trtllm_bench_min_latency"])
    lines += speculative_table(res["speculative_record"])
    lines += ["", "### Error bands per cost path", "",
              "| path | metric | points | MdAPE | MAPE | signed | band shown (+-) |", "|---|---|---|---|---|---|---|"]
    for path, b in res["bands"].items():
        for metric, s in b["metrics"].items():
            lines.append(f"| {path} | {metric} | {s['n']} | {s['median_abs_pct']:.1f} % | {s['mape_pct']:.1f} % | "
                         f"{s['median_signed_pct']:+.1f} % | {s['band_pct']:.1f} % |")
    for feature, rec in res.get("layout_bands", {}).items():
        lines += ["", f"| layout: {feature} | metric | points | MdAPE | MAPE | signed | band shown (+-: never "
                  "narrower than the path's) |", "|---|---|---|---|---|---|---|"]
        for path, entry in rec["paths"].items():
            floor = res["bands"][path]["metrics"]
            for metric, s in entry["metrics"].items():
                shown = max(s["band_pct"], floor[metric]["band_pct"])
                lines.append(f"| {path} | {metric} | {s['n']} | {_stats_cells(s)} | {shown:.1f} % |")
        if rec.get("offline"):
            o = rec["offline"]
            lines.append(f"| saturated runs ({_run_sources(o['points'])}) | saturated tok/s/GPU | {o['n']} | "
                         f"{_stats_cells(o)} | {o['min_signed_pct']:+.1f} .. {o['max_signed_pct']:+.1f} % |")
    return "\n".join(lines)


RUN_SOURCES = (("MLP", "MLPerf Offline"), ("TRTB-", "trtllm-bench"), ("TRTPO-", "TensorRT-LLM performance overview"))


def _run_sources(ids: list[str]) -> str:
    """'5 MLPerf Offline, 3 trtllm-bench, 39 TensorRT-LLM performance overview': saturated runs counted by source."""
    counts = [(sum(i.startswith(prefix) for i in ids), name) for prefix, name in RUN_SOURCES]
    return ", ".join(f"{n} {name}" for n, name in counts if n)


def band_file(res: dict) -> dict:
    """The shipped band file's content for a `validation.run()` result: the paths' bands and the layout features'
    own records (`validation.layout_bands`) and the cross-vendor records (`validation.vendor_records`)."""
    return {"generated_by": "lpxsim validate --write", "bands": res["bands"], "layouts": res["layout_bands"],
            "vendors": res["vendor_records"], "systems": res["system_records"],
            "speculative": res["speculative_record"]}


def _row_line(i: int, r: dict) -> str:
    """One replayed row of `rows_markdown`'s table (`validation.replay_user_rows`' rows)."""
    dp = {"true": "/DP"}
    if r.get("disagg") == "true":
        layout = (f"P {r['prefill_tp']}{dp.get(r['prefill_dp_attention'], '')} x {r['prefill_workers']}, "
                  f"D {r['decode_tp']}{dp.get(r['decode_dp_attention'], '')} x {r['decode_workers']}")
    else:
        layout = f"TP{r['tp']} EP{r['ep']}{dp.get(r['dp_attention'], '')}"
    spec = f" mtp{r['spec_draft_tokens']}" if r.get("spec_method") not in (None, "", "none") else ""
    head = (f"| {r.get('point_id') or i} | {r['hardware']} | {r['framework']}{spec} | {r['precision']} | {layout} | "
            f"{int(r['isl']):,} / {int(r['osl']):,} | {int(r['conc']):,} |")
    if r.get("skipped"):
        return head + f" {r['tpot_s'] * 1e3:.2f} | not priced: {r['skipped']} | | | |"

    def err(v: float | None) -> str:
        return "-" if v is None else f"{v:+.1f} %"

    return (head + f" {r['tpot_s'] * 1e3:.2f} ({r['pred_tpot_s'] * 1e3:.2f}) | {err(r['tpot_err_pct'])} | "
            f"{r['ttft_s']:.3f} ({r['pred_ttft_s']:.3f}) | {err(r['ttft_err_pct'])} | "
            f"{err(r['output_tok_s_per_gpu_err_pct'])} |")


def rows_markdown(path: str, res: dict) -> str:
    """The replay of a user's rows (`validation.replay_user_rows`) as markdown."""
    lines = _gpu_table(f"Your rows: {path}", res)
    lines += ["| GPU precision | cost path |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in res["cost_path"].items()]
    lines += ["", "| GPU framework precision | concurrency | rows | TTFT MdAPE | MAPE | signed |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {c['config']} | {c['conc']} | {c['n']} | {_stats_cells(c)} |" for c in res["ttft_by_config"]]
    if res.get("decode_step_by_config"):
        lines += ["", "| GPU framework precision | rows | step MdAPE | MAPE | signed | TPOT MdAPE | MAPE | signed | "
                      "TPOT over step, measured (median) | predicted |", "|---|---|---|---|---|---|---|---|---|---|"]
        lines += _step_rows(res["decode_step_by_config"])
    lines += ["", "Each row (measured, predicted, error; a disaggregated row's pools as prefill and decode tp x workers):",
              "", "| row | GPU | engine | precision | layout | ISL / OSL | conc | TPOT ms | error | TTFT s | error | "
                  "out tok/s/GPU error |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [_row_line(i, r) for i, r in enumerate(res.get("rows", []), start=1)]
    left = ", ".join(f"{n} {why}" for why, n in sorted(res["left_out"].items())) or "none"
    stat = res.get("latency_statistic", "median")
    tail = ["", f"latencies compared: the file's {stat}s" + (
        " (a mean TTFT with the mean over the benchmark's run simulated as its client runs it, the start-up burst "
        "of C simultaneous requests included: engine.benchmark_run)" if stat == "mean" else ""),
            f"rows left out (not replayed): {left}"]
    if res.get("drafts_from_launch_script"):
        tail.append(f"speculative rows without spec_draft_tokens, priced at the drafts a round InferenceX's launch "
                    f"script sets for their engine: {res['drafts_from_launch_script']}")
    return "\n".join(lines + tail)


def validate_cmd(
    write: bool = typer.Option(False, "--write", help="regenerate the shipped band file (catalog/fitted/error_bands.json)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    rows: str | None = path_option(None, "--rows", help="replay your own InferenceX-format CSV of DeepSeek-R1 "
                                   "serving points (any catalog GPU; the columns of data/measured/README.md) "
                                   "instead of the shipped tables", metavar="CSV"),
) -> None:
    """Reproduce the validation tables (median absolute error and MAPE) and each cost path's error band."""
    from lpxsim.core.errors import UserError
    from lpxsim.engine import validation
    from lpxsim.engine.bands import shipped_path

    if rows is not None:
        if write:
            raise UserError("write", "--write regenerates the shipped bands from the shipped data; not with --rows")
        got = validation.replay_user_rows(rows)
        if as_json:
            emit_json(got)
        else:
            sys.stdout.write(rows_markdown(rows, got) + "\n")
        return
    res = validation.run()
    if write:
        # under a temporary name, then renamed: an interrupted write never leaves a truncated band file
        outputs.atomic_write_text(shipped_path(), json.dumps(band_file(res), indent=1, sort_keys=True) + "\n",
                                  "write")
    if as_json:
        emit_json(res)
    else:
        sys.stdout.write(markdown(res) + "\n")


def register(app: typer.Typer) -> None:
    app.command("validate")(validate_cmd)
