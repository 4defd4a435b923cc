"""The predicted per-user speed range of an SRAM machine's published figure (issue 28, item 6).

A public figure of a first-generation Groq or Cerebras endpoint was measured at a load nobody published.
The prediction is therefore a range of output tok/s per user, not a point:

- high end: one dedicated stream at batch 1 (1 / the compiled or modelled step latency; for wafer-scale the
  closed-loop estimate at concurrency 1);
- low end: the endpoint as full as its pipeline or its KV lets it be. A pipelined machine keeps one
  single-stream micro-batch in each stage (`lpu.served.full_pipeline_tok_s_user`: period = stages x the
  busiest stage's interval); a wafer pipeline may also batch many users per micro-batch up to its KV
  capacity (`steady_state.decode_period` at the largest batch the KV holds). The lower of the two.

Nothing is fitted to the figures: the load is the stated input range.
"""

from __future__ import annotations

import math


def predicted_range(point: dict) -> dict:
    """{batch1_tok_s_user, pipeline_full_tok_s_user, kv_full_tok_s_user, low_tok_s_user, chips, stages} for
    one row of ``data/measured/published_points.csv``."""
    if point["path"] == "wafer-scale":
        return _wafer(point)
    return _lpu(point)


def _int(v: str | None) -> int | None:
    return int(v) if v not in (None, "") else None


def _lpu(p: dict) -> dict:
    from lpxsim.graph import Phase
    from lpxsim.lpu import LpxStepModel
    from lpxsim.lpu.served import full_pipeline_tok_s_user

    ctx = _int(p["context"])
    kw = {"chips": _int(p["chips"]), "weights": p["weights"], "context": ctx}
    if p["system"] == "lpx":  # the deployment T1-T3 run on: compiled once for its 131,072-token target
        kw = {"weights": p["weights"]}
    sm = LpxStepModel(p["model"], p["system"], **{k: v for k, v in kw.items() if v is not None})
    t = sm.step_summary(Phase.decode([ctx]))["timing"]
    stages = len(t["stage_spans_s"])
    full = full_pipeline_tok_s_user(t["latency_s"], t["interval_s"], stages)
    return {"batch1_tok_s_user": round(1.0 / t["latency_s"], 1), "pipeline_full_tok_s_user": round(full, 1),
            "kv_full_tok_s_user": None, "low_tok_s_user": round(full, 1), "chips": sm.chips, "stages": stages,
            "layout": sm.layout.describe()}


def _wafer(p: dict) -> dict:
    from lpxsim.backends.factory import Layout, make_step_model
    from lpxsim.engine.steady_state import decode_period, steady_state
    from lpxsim.lpu.served import full_pipeline_tok_s_user
    from lpxsim.step.protocol import DecodeBatch

    isl, osl = int(p["isl"]), int(p["osl"])
    step = make_step_model(p["model"], p["system"], Layout(), weights=p["weights"], kv="bf16")
    one = steady_state(step, isl=isl, osl=osl, concurrency=1)
    ctx = isl + osl // 2  # the mean context over the decode phase
    c = step.decode_step(DecodeBatch.uniform(1, ctx))
    stages = len(getattr(step, "stages", ())) or 1
    full = full_pipeline_tok_s_user(c.latency_s, c.interval_s, stages)
    kv_batch = _kv_full_batch(step, ctx)
    period, _ = decode_period(step, kv_batch, ctx)
    kv_full = 1.0 / period
    return {"batch1_tok_s_user": round(one.tok_s_user, 1), "pipeline_full_tok_s_user": round(full, 1),
            "kv_full_tok_s_user": round(kv_full, 1), "low_tok_s_user": round(min(full, kv_full), 1),
            "chips": step.chips, "stages": stages, "layout": step.name}


def _kv_full_batch(step, context: int) -> int:  # noqa: ANN001 - any StepModel
    """The most streams at `context` whose KV fits the replica (at least 1), capped by the engine's batch."""
    per = max(step.kv_bytes(context), 1.0)
    return max(1, min(step.max_batch(), math.floor(step.kv_capacity_bytes() / per)))
