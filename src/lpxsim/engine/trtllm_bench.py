"""NVIDIA's published `trtllm-bench` runs as judges (TRT-BESTPERF, TRT-PERF-OVERVIEW in docs/sources.md).

TensorRT-LLM's "best performance practice" page for DeepSeek-R1 states five runs with the exact command, engine
options and printed results: three saturated runs (every request queued through a fixed concurrency, like an
MLPerf Offline query) and two at one user with MTP speculative decoding. They are judges, never inputs.

- saturated (``data/measured/trtllm_bench_saturated.csv``, the MLPerf points' columns): priced exactly as the
  MLPerf Offline points (`validation.mlperf_offline`: the stated layout, caps and request count through
  `engine.offline_run`), at the run's fixed prompt and output lengths (`dataset` "uniform");
- one user with MTP (``data/measured/trtllm_bench_min_latency.csv``): priced by the operating-point engine
  `estimate` runs (`engine.answer.answer` at the stated deployment, concurrency 1, MTP k drafts at the model's
  default acceptance profile) against trtllm-bench's per-user output throughput, which is each request's
  output tokens over its whole latency (first token included): OSL / E2E.

TensorRT-LLM's performance overview (TRT-PERF-OVERVIEW; ``data/measured/trtllm_perf_overview.csv``) adds saturated
runs of five models on H100, H200, B200 and GB200 at up to six prompt and output lengths, each at trtllm-bench's own
settings (`overview`): the engine's batch and token caps are what trtllm-bench derives from the KV capacity
(`bench_engine_settings`, TRT-BENCH-TUNE), and every request reserves KV for its prompt and output when admitted
(trtllm-bench's GUARANTEED_NO_EVICT, TRT-CAPACITY).
"""

from __future__ import annotations

import math

from lpxsim.engine.bands import error_stats

BENCH_BATCH_LIMIT = 4096  # trtllm-bench caps its batch estimate here (TRT-BENCH-TUNE: decoder buffers)
BENCH_TOKEN_LIMIT = 32768  # and its token budget here (activation buffers)
BENCH_MIN_TOKENS = 2048  # the least token budget it sets (context / generation overlap)


def saturated_points(path: str | None = None) -> list[dict]:
    """The packaged saturated trtllm-bench runs (the MLPerf points' columns), or those of `path`."""
    from lpxsim.engine.validation import packaged_rows

    return packaged_rows("trtllm_bench_saturated.csv", path)


def min_latency_points(path: str | None = None) -> list[dict]:
    """The packaged one-user MTP trtllm-bench runs, or those of `path`."""
    from lpxsim.engine.validation import packaged_rows

    return packaged_rows("trtllm_bench_min_latency.csv", path)


def saturated(points: list[dict] | None = None) -> dict:
    """The saturated runs against the offline engine, as `validation.mlperf_offline` prices MLPerf points."""
    from lpxsim.engine.validation import mlperf_offline

    return mlperf_offline(saturated_points() if points is None else points)


def one_user_rate(p: dict, mtp: int) -> tuple[float, float]:
    """(OSL / E2E in tok/s, tokens a round) of run `p` priced by the operating-point engine with `mtp` drafts."""
    from lpxsim.catalog import get_model
    from lpxsim.engine.answer import answer
    from lpxsim.engine.deployment import Precision, gpu_layout_text
    from lpxsim.engine.query import Deployment, Load, Workload
    from lpxsim.engine.validation import row_release
    from lpxsim.specs.mtp import default_accept

    tp, ep = int(p["tp"]), int(p["ep"])
    dep = Deployment(p["system"], int(p["gpus"]), layout=gpu_layout_text(tp, ep), given=True,
                     framework=p["framework"])
    accept = default_accept(get_model(p["model"])) if mtp else 0.0
    a = answer(p["model"], dep, Workload(int(p["isl"]), int(p["osl"])), Load(concurrency=1),
               precision=Precision(p["weights"], p["kv"]), framework=p["framework"], spec_k=mtp, spec_accept=accept,
               release=row_release(p))
    return a.workload.osl / a.e2e_s, a.tokens_per_round


def min_latency(points: list[dict] | None = None) -> dict:
    """Each one-user MTP run against the engine's OSL / E2E at its stated deployment and draft length, beside the
    same deployment without MTP (the speed-up credited), with the median absolute error, MAPE and signed median."""
    from lpxsim.engine.validation import _pct

    rows, errs = [], []
    for p in min_latency_points() if points is None else points:
        k = int(p["mtp"])
        with_mtp, per_round = one_user_rate(p, k)
        without, _ = one_user_rate(p, 0)
        pub = float(p["tok_s_user"])
        err = _pct(with_mtp, pub)
        errs.append(err)
        rows.append({"id": p["id"], "system": p["system"], "gpus": int(p["gpus"]), "model": p["model"],
                     "layout": f"TP{p['tp']}/EP{p['ep']} {p['weights']}/{p['kv']} KV", "mtp": k,
                     "isl": int(p["isl"]), "osl": int(p["osl"]), "published_tok_s_user": pub,
                     "predicted_tok_s_user": round(with_mtp, 1), "err_pct": round(err, 1),
                     "tokens_per_round": round(per_round, 2), "no_mtp_tok_s_user": round(without, 1),
                     "speedup_credited": round(with_mtp / without, 2), "software": p["software"],
                     "source": p["source"]})
    return {"points": rows, "stats": error_stats(errs).as_row()}


def overview_points(path: str | None = None) -> list[dict]:
    """The packaged rows of TensorRT-LLM's performance overview, or those of `path`."""
    from lpxsim.engine.validation import packaged_rows

    return packaged_rows("trtllm_perf_overview.csv", path)


def bench_engine_settings(kv_requests: float, isl: int, osl: int, pp: int = 1) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) trtllm-bench sets for a run whose KV holds `kv_requests` requests of
    isl + osl tokens (TRT-BENCH-TUNE, `finetune_setting` with its optimistic rounding): the batch estimate capped at
    4,096 and split over the pipeline's stages, rounded up (to 32 below 256, at least 64; to 128 below 1,024; to
    256 above); the token budget that batch's prompts and decodes need, capped at 32,768, rounded up (to 256 below
    4,096, at least 2,048; to 512 below 8,192; to 1,024 above)."""
    raw_bs = min(kv_requests, BENCH_BATCH_LIMIT) / pp
    raw_tokens = min(raw_bs * (1 + isl / osl), BENCH_TOKEN_LIMIT)
    if raw_bs < 256:
        batch = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        batch = 128 * math.ceil(raw_bs / 128)
    else:
        batch = 256 * math.ceil(raw_bs / 256)
    if raw_tokens < 4096:
        tokens = max(BENCH_MIN_TOKENS, 256 * math.ceil(raw_tokens / 256))
    elif raw_tokens < 8192:
        tokens = 512 * math.ceil(raw_tokens / 512)
    else:
        tokens = 1024 * math.ceil(raw_tokens / 1024)
    return batch, tokens


def overview_point(p: dict) -> dict:
    """One overview run priced at trtllm-bench's settings: the KV at the run's memory fraction holds
    kv_requests requests of isl + osl tokens; trtllm-bench's caps follow from it (`bench_engine_settings`; the
    batch cap is per attention-DP rank, TRT-BATCH); every request reserves its prompt and output when admitted;
    decode steps replay the CUDA graphs of the capture sizes the page states (`graph_batches`, padded up to the
    next) that the engine keeps under those caps (`gpu.engine.trtllm_capture_sizes`); the run's requests, all
    queued, run to their end (`engine.offline_run`)."""
    from lpxsim.engine.lengths import uniform
    from lpxsim.engine.offline_run import offline_run
    from lpxsim.engine.validation import _flag, _pct, row_release
    from lpxsim.gpu.engine import trtllm_capture_sizes
    from lpxsim.gpu.step import GpuStepModel

    isl, osl, tp, ep = (int(p[k]) for k in ("isl", "osl", "tp", "ep"))
    dp = _flag(p, "dp_attention", default=False)
    ranks = tp if dp else 1
    stated = tuple(int(b) for b in p["graph_batches"].split()) if (p.get("graph_batches") or "").strip() else None
    common = dict(tp=tp, ep=ep, dp_attention=dp, weights=p["weights"], kv=p["kv"], framework="trtllm",
                  mem_fraction=float(p["kv_mem_fraction"]), release=row_release(p))
    # the KV's request count comes before the caps; the engine sets aside activations for the largest batch
    # trtllm-bench may set, so the count is taken with that cap in place
    probe = GpuStepModel(p["model"], p["system"], max_batch=BENCH_BATCH_LIMIT, **common)
    kv_requests = probe.kv_capacity_bytes() / probe.kv_bytes(isl + osl)
    batch_cap, tokens = bench_engine_settings(kv_requests, isl, osl)
    # the engine captures the given sizes it can run, and pads a larger batch to its largest (TRT-GRAPH-FILTER)
    graphs = trtllm_capture_sizes(stated or probe.engine.graph_batches, batch_cap, tokens)
    step = GpuStepModel(p["model"], p["system"], max_batch=batch_cap * ranks, graph_batches=graphs, **common)
    run = offline_run(step, uniform(isl, osl), int(p["requests"]), iteration_tokens=tokens, reserve_tokens=isl + osl)
    pub = float(p["tok_s_per_gpu"])
    pred = run.output_tok_s_per_chip
    return {"id": p["id"], "system": p["system"], "model": p["model"], "layout": step.layout.label(),
            "attention_dp": dp, "isl": isl, "osl": osl, "max_batch_size": batch_cap, "max_num_tokens": tokens,
            "batch": run.slots, "limited_by": run.steady.limited_by, "published_tok_s_per_gpu": pub,
            "predicted_tok_s_per_gpu": round(pred, 1), "err_pct": round(_pct(pred, pub), 1),
            "source": p["source"]}


def overview(points: list[dict] | None = None) -> dict:
    """Every overview run against `overview_point`, with the statistics over all runs and per model."""
    rows = [overview_point(p) for p in (overview_points() if points is None else points)]
    per_model = {m: error_stats([r["err_pct"] for r in rows if r["model"] == m]).as_row()
                 for m in sorted({r["model"] for r in rows})}
    return {"points": rows, "stats": error_stats([r["err_pct"] for r in rows]).as_row(), "by_model": per_model}
