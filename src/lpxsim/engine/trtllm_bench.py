"""NVIDIA's published `trtllm-bench` runs of DeepSeek-R1 as judges (TRT-BESTPERF in docs/sources.md).

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
"""

from __future__ import annotations

import csv

from lpxsim.engine.bands import error_stats


def saturated_points(path: str | None = None) -> list[dict]:
    """The packaged saturated trtllm-bench runs (the MLPerf points' columns), or those of `path`."""
    from lpxsim.engine.validation import _data

    with open(path or _data("trtllm_bench_saturated.csv"), newline="") as fh:
        return list(csv.DictReader(fh))


def min_latency_points(path: str | None = None) -> list[dict]:
    """The packaged one-user MTP trtllm-bench runs, or those of `path`."""
    from lpxsim.engine.validation import _data

    with open(path or _data("trtllm_bench_min_latency.csv"), newline="") as fh:
        return list(csv.DictReader(fh))


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
    from lpxsim.specs.mtp import default_accept

    tp, ep = int(p["tp"]), int(p["ep"])
    dep = Deployment(p["system"], int(p["gpus"]), layout=gpu_layout_text(tp, ep), given=True,
                     framework=p["framework"])
    accept = default_accept(get_model(p["model"])) if mtp else 0.0
    a = answer(p["model"], dep, Workload(int(p["isl"]), int(p["osl"])), Load(concurrency=1),
               precision=Precision(p["weights"], p["kv"]), framework=p["framework"], spec_k=mtp, spec_accept=accept)
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
