"""Per-request results and the run summary, with AIPerf / `vllm bench serve` definitions.

* TTFT = first token time - arrival.
* TPOT = (E2E - TTFT) / (output tokens - 1): excludes the first token (NaN for 1-token outputs).
* ITL = every gap between consecutive tokens of a request, pooled over all requests
  (vLLM's definition); a decode run of k steps of dt for n sequences adds n x k gaps of dt,
  and a speculative round's extra accepted tokens arrive with a 0 gap.
* E2E = last token time - arrival; output tok/s per user (`tok_s_user`) = 1 / TPOT, the streaming
  speed a user sees after the first token.
* Goodput = completed requests (and their output tokens) per second meeting both SLOs.
* Fleet tok/s = output tokens / makespan; tok/s per MW uses the power of every pool's hardware
  (StepModel.power_w x replicas), including FFN and drafter pools.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lpxsim.serving.request import DONE, REJECTED

PCTS = (10, 50, 90, 99)


@dataclass
class SimResult:
    """A run's per-request DataFrame and its summary dict (plain JSON-able values)."""

    requests: pd.DataFrame
    summary: dict[str, Any]
    pools: pd.DataFrame = field(default_factory=pd.DataFrame)
    wall_s: float = math.nan  # wall-clock seconds the run took (not a result; never in `summary`)


def request_frame(sim) -> pd.DataFrame:
    reqs = sim.requests
    cols: dict[str, list] = {k: [] for k in (
        "request_id", "session", "turn", "klass", "arrival_s", "isl", "osl", "cached_tokens", "status", "reason",
        "pool", "worker", "decode_pool", "decode_worker", "first_token_s", "finish_s", "handoff_s", "preemptions",
        "spec_rounds", "spec_accepted", "accept_rate", "reloaded_tokens", "decode_start_s")}
    for r in reqs:
        cols["request_id"].append(r.rid)
        cols["session"].append(r.session)
        cols["turn"].append(r.turn)
        cols["klass"].append(r.klass)
        cols["arrival_s"].append(r.arrival_s)
        cols["isl"].append(r.isl)
        cols["osl"].append(r.osl)
        cols["cached_tokens"].append(r.cached_tokens)
        cols["status"].append(r.status)
        cols["reason"].append(r.reason)
        cols["pool"].append(r.pool)
        cols["worker"].append(r.worker)
        cols["decode_pool"].append(r.decode_pool)
        cols["decode_worker"].append(r.decode_worker)
        cols["first_token_s"].append(r.first_token_s)
        cols["finish_s"].append(r.finish_s)
        cols["handoff_s"].append(r.handoff_s)
        cols["preemptions"].append(r.preemptions)
        cols["spec_rounds"].append(r.spec_rounds)
        cols["spec_accepted"].append(r.spec_accepted)
        cols["accept_rate"].append(r.accept_rate)
        cols["reloaded_tokens"].append(r.reloaded_tokens)
        cols["decode_start_s"].append(r.decode_start_s)
    df = pd.DataFrame(cols)
    done = df["status"] == DONE
    df["output_tokens"] = np.where(done, df["osl"], 0)
    df["ttft_s"] = df["first_token_s"] - df["arrival_s"]
    df["e2e_s"] = df["finish_s"] - df["arrival_s"]
    with np.errstate(invalid="ignore", divide="ignore"):
        df["tpot_s"] = np.where(df["osl"] > 1, (df["e2e_s"] - df["ttft_s"]) / (df["osl"] - 1), np.nan)
        df["tok_s_user"] = 1.0 / df["tpot_s"]
    return df


def _pcts(x: np.ndarray) -> dict[str, float]:
    x = x[np.isfinite(x)]
    if not len(x):
        return {f"p{p}": math.nan for p in PCTS} | {"mean": math.nan}
    return {f"p{p}": float(np.percentile(x, p)) for p in PCTS} | {"mean": float(x.mean())}


def _weighted_pcts(samples: list[tuple[float, int]]) -> dict[str, float]:
    if not samples:
        return {f"p{p}": math.nan for p in PCTS} | {"mean": math.nan}
    v = np.array([s[0] for s in samples])
    w = np.array([s[1] for s in samples], dtype=float)
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    total = cum[-1]
    out = {f"p{p}": float(v[min(len(v) - 1, np.searchsorted(cum, p / 100.0 * total))]) for p in PCTS}
    out["mean"] = float((v * w).sum() / total)
    return out


def pool_frame(sim, makespan: float) -> pd.DataFrame:
    rows = []
    tl = sim.occupancy
    for p in sim.pools.values():
        ws = p.workers
        tiers = [w.kv.tier for w in ws if w.kv.tier is not None]
        cap_all = sum(w.kv.capacity for w in ws)
        used = tl.kv_used.get(p.name)
        busy = sum(w.busy_s for w in ws)
        cap = sum(w.kv.capacity for w in ws)
        kv_int = sum(w.kv_integral for w in ws)
        if not ws and p.shares:  # a shared FFN or drafter pool: busy while any attached worker runs
            util = sum(sh.busy_until(makespan) for sh in p.shares) / (len(p.shares) * makespan) if makespan > 0 else math.nan
        else:
            util = busy / (len(ws) * makespan) if ws and makespan > 0 else math.nan
        rows.append({
            "pool": p.name, "role": p.role, "system": p.cfg.system, "model": p.cfg.model, "backend": p.cfg.backend,
            "step_model": p.step_name, "workers": p.cfg.workers, "chips": p.chips, "power_w": p.power_w,
            "utilisation": util,
            "kv_capacity_bytes": cap,
            "kv_occupancy_mean": kv_int / (cap * makespan) if ws and cap > 0 and makespan > 0 else math.nan,
            "kv_occupancy_peak": max((w.kv.peak / w.kv.capacity for w in ws), default=math.nan),
            "kv_over_capacity": any(w.kv.peak > w.kv.capacity * (1 + 1e-9) for w in ws),
            "prefix_hit_tokens": sum(w.kv.hits_tokens for w in ws),
            "preemptions": sum(w.preemptions for w in ws),
            "output_tokens": sum(w.tokens_out for w in ws),
            "evictions": sum(w.kv.evictions for w in ws),
            "evicted_bytes": sum(w.kv.evicted_bytes for w in ws),
            "offload_tier": tiers[0].name if tiers else "",
            "reloads": sum(t.reloads for t in tiers),
            "reload_bytes": sum(t.reload_bytes for t in tiers),
            "offload_write_bytes": sum(t.write_bytes for t in tiers),
            "sessions_resident_max": sim.resident_count(p.name).max if ws else 0,
            # the time series the report draws: KV occupancy and sessions resident over simulated time
            "timeline_t_s": list(tl.t_s) if ws else [],
            "kv_occupancy_timeline": [u / cap_all for u in used] if used and cap_all > 0 else [],
            "sessions_resident_timeline": list(tl.resident.get(p.name, [])),
            "running_timeline": list(tl.running.get(p.name, [])),
        })
    return pd.DataFrame(rows)


CONTEXT_BINS = ((0, 32_768, "<32K"), (32_768, 100_000, "32K-100K"), (100_000, 1 << 62, ">=100K"))


def by_context(done: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per-user speed and TTFT by prompt length: long-context turns are where batch-1 speed and capacity part."""
    out = {}
    for lo, hi, label in CONTEXT_BINS:
        d = done[(done["isl"] >= lo) & (done["isl"] < hi)]
        if len(d):
            out[label] = {"requests": len(d), "tok_s_user_p50": float(d["tok_s_user"].median()),
                          "ttft_p50_s": float(d["ttft_s"].median()), "mean_isl": float(d["isl"].mean())}
    return out


def ttft_by_turn(done: pd.DataFrame) -> dict[str, dict[str, float]]:
    """TTFT of sessions' first turns (the whole prompt prefilled) against their later turns (only what is not
    cached); requests outside sessions count as first turns."""
    first = (done["turn"] == 0) | (done["session"] < 0)
    return {"first": _pcts(done.loc[first, "ttft_s"].to_numpy()) | {"requests": int(first.sum())},
            "later": _pcts(done.loc[~first, "ttft_s"].to_numpy()) | {"requests": int((~first).sum())}}


def summarize(sim) -> SimResult:
    df = request_frame(sim)
    done = df[df["status"] == DONE]
    makespan = float(sim.engine.now) if len(df) else 0.0
    pools = pool_frame(sim, makespan)
    power = float(pools["power_w"].sum()) if len(pools) else 0.0
    out_tokens = int(done["osl"].sum())
    slo = sim.wcfg.slo
    good = done[(done["ttft_s"] <= slo.ttft_s) & ((done["tpot_s"] <= slo.tpot_s) | done["tpot_s"].isna())]
    itl = [s for w in sim.workers() for s in w.itl]
    fleet_tps = out_tokens / makespan if makespan > 0 else math.nan
    mean_conc = sim.n_integral / makespan if makespan > 0 else math.nan
    rejected = df[df["status"] == REJECTED]
    summary: dict[str, Any] = {
        "fleet": sim.fleet.name,
        "workload": sim.wcfg.name,
        "hardware": [f"{r.pool}: {r.workers} x {r.step_model} ({r.chips} chips)" for r in pools.itertuples()],
        "requests": len(df),
        "completed": len(done),
        "rejected": len(rejected),
        "incomplete": int((df["status"] == "incomplete").sum()),
        "reject_reasons": rejected["reason"].value_counts().to_dict(),
        "makespan_s": makespan,
        "mean_isl": float(done["isl"].mean()) if len(done) else math.nan,
        "mean_osl": float(done["osl"].mean()) if len(done) else math.nan,
        "mean_context": float((done["isl"] + done["osl"] / 2).mean()) if len(done) else math.nan,
        "mean_concurrency": mean_conc,
        "arrival_rate": len(df) / makespan if makespan > 0 else math.nan,
        "ttft_s": _pcts(done["ttft_s"].to_numpy()),
        "tpot_s": _pcts(done["tpot_s"].to_numpy()),
        "itl_s": _weighted_pcts(itl),
        "e2e_s": _pcts(done["e2e_s"].to_numpy()),
        "tok_s_user": _pcts(done["tok_s_user"].to_numpy()),
        "by_context": by_context(done),
        "slo": {"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s},
        "goodput_req_s": len(good) / makespan if makespan > 0 else math.nan,
        "goodput_tok_s": float(good["osl"].sum()) / makespan if makespan > 0 else math.nan,
        "fleet_tok_s": fleet_tps,
        "power_w": power,
        "tok_s_per_mw": fleet_tps / (power / 1e6) if power > 0 else math.nan,
        "prefix_hit_rate": float(done["cached_tokens"].sum() / max(1, done["isl"].sum())) if len(done) else 0.0,
        "reload_rate": float(done["reloaded_tokens"].sum() / max(1, done["isl"].sum())) if len(done) else 0.0,
        "evictions": int(pools["evictions"].sum()) if len(pools) else 0,
        "reloads": int(pools["reloads"].sum()) if len(pools) else 0,
        "sessions_resident_max": int(pools["sessions_resident_max"].max()) if len(pools) else 0,
        "ttft_by_turn": ttft_by_turn(done),
        "preemptions": int(df["preemptions"].sum()),
        "kv_over_capacity": bool(pools["kv_over_capacity"].any()) if len(pools) else False,
        "events": sim.engine.events,
        "little_L": mean_conc,
        "little_lambda_W": (len(done) / makespan) * float(done["e2e_s"].mean()) if len(done) and makespan else math.nan,
    }
    return SimResult(requests=df, summary=summary, pools=pools)
