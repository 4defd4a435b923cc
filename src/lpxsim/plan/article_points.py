"""The article's operating points, priced from fresh step models (a notebook, the docs; the tour prices the rows it
already has instead: `lpxsim.report.economics`).

- `article_economics`: cost and revenue of LPX and Vera Rubin NVL72 serving Gemma 4 31B at the
  article's contexts (10K and 100K input), at concurrency 1 (the demo number) and at a loaded point
  (the concurrency ceiling decides whether the rack pays for itself).
- `moe_long_context`: a MoE model on LPX at 100K context through the compiled LPX backend: racks,
  concurrent streams that fit, and tok/s per user at concurrency 1 and at that ceiling.

Both return plain dicts of SI numbers plus the economics of `lpxsim.plan.costs.economics`.
"""

from __future__ import annotations

from typing import Any

from lpxsim.backends.factory import Layout, make_step_model
from lpxsim.catalog import get_system
from lpxsim.core.errors import UserError
from lpxsim.plan.capacity import capacity
from lpxsim.plan.costs import CostModel, estimate_economics
from lpxsim.plan.estimate import steady_state
from lpxsim.plan.operating_point import PrefixCachedStep
from lpxsim.step.protocol import StepModel

ARTICLE_MODEL = "gemma-4-31b"
ARTICLE_CONTEXTS = (10_000, 100_000)
ARTICLE_OSL = 500  # AA normalises answers to 500 output tokens (docs/assumptions.md, aa-answer-length)
# Concurrencies priced per system: 1 is the article's demo point; the second a loaded point.
DEFAULT_CONCURRENCIES: dict[str, tuple[int, ...]] = {"lpx": (1, 8), "vr-nvl72": (1, 64)}
GPU_REPLICA_GPUS = 8  # a TP8 replica (1/9 of an NVL72 rack), as the tour's Rubin fleets


def _layout(system: str, isl: int, osl: int, concurrency: int, racks: float | None = None) -> Layout:
    s = get_system(system)
    if s.is_lpu:
        return Layout(racks=racks, isl=isl, osl=osl, concurrency=concurrency)
    return Layout(gpus=GPU_REPLICA_GPUS, isl=isl, osl=osl, concurrency=concurrency, goal="latency")


def priced_point(step: StepModel, system: str, model: str, isl: int, osl: int, concurrency: int,
                 costs: CostModel | None = None, new_tokens: int | None = None) -> dict[str, Any]:
    """One steady-state point of `step` with its economics; per-user speed beside context and concurrency.

    `new_tokens`: input tokens prefilled per request, the rest found in the prefix cache (an agentic turn).
    """
    if new_tokens is not None:
        step = PrefixCachedStep(step, isl, new_tokens)
    e = steady_state(step, isl=isl, osl=osl, concurrency=concurrency)
    s = get_system(system)
    return {
        "system": s.name, "model": model, "layout": step.name, "chips": e.chips,
        "units": e.chips / s.chips_per_unit, "unit_name": s.unit_name, "context": isl, "osl": osl,
        "concurrency": concurrency, "tok_s_user": e.tok_s_user, "tok_s_total": e.tok_s_total,
        "ttft_s": e.ttft_s, "power_w": e.power_w, "tok_s_per_mw": e.tok_s_per_mw, "new_tokens": new_tokens or isl,
        **estimate_economics(e, s.name, costs),
    }


def article_economics(
    systems: tuple[str, ...] = ("lpx", "vr-nvl72"),
    contexts: tuple[int, ...] = ARTICLE_CONTEXTS,
    osl: int = ARTICLE_OSL,
    concurrencies: dict[str, tuple[int, ...]] | None = None,
    model: str = ARTICLE_MODEL,
    costs: CostModel | None = None,
) -> list[dict[str, Any]]:
    """Cost and revenue rows for each system, context and concurrency (Gemma 4 31B by default).

    LPX uses the compiled LPX backend (one rack, laid out for each point's workload); GPU systems the
    GPU model with a TP8 replica. A point whose KV does not fit is a row with `error` set, not a failure.
    """
    conc = concurrencies or DEFAULT_CONCURRENCIES
    rows = []
    for system in systems:
        name = get_system(system).name
        for ctx in contexts:
            for c in conc.get(name, (1,)):
                try:
                    step = make_step_model(model, name, _layout(name, ctx, osl, c))
                    rows.append(priced_point(step, name, model, ctx, osl, c, costs))
                except UserError as e:
                    rows.append({"system": name, "model": model, "context": ctx, "osl": osl, "concurrency": c,
                                 "error": str(e)})
    return rows


def moe_long_context(
    model: str = "gpt-oss-120b",
    context: int = 100_000,
    osl: int = 1_000,
    racks: float | None = 2.0,
    concurrency: int = 16,
    costs: CostModel | None = None,
    new_tokens: int | None = None,
) -> dict[str, Any]:
    """A MoE model on LPX at long context (compiled LPX backend): racks, streams that fit, tok/s per user.

    The layout is compiled for `concurrency` streams of `context + osl` tokens; if it cannot place that
    many, the concurrency is halved until one places. Returns the memory-accounting ceiling (plan
    capacity), the compiled layout's ceiling, and priced points at concurrency 1 and at
    min(concurrency, ceiling). `new_tokens`: prefill only that many input tokens per request (a later
    agentic turn over a cached session); None prefills the whole context (cold), which at 100K makes a
    loaded replica prefill-bound.
    """
    if context <= 0 or osl <= 0 or concurrency <= 0:
        raise UserError("context", "context, osl and concurrency must be positive")
    acct = capacity(model, "lpx", context + osl, racks=racks)
    target, step = concurrency, None
    while step is None:
        try:
            step = make_step_model(model, "lpx", Layout(racks=racks, isl=context, osl=osl, concurrency=target))
        except UserError:
            if target == 1:
                raise
            target = max(1, target // 2)
    ceiling = int(step.kv_capacity_bytes() // step.kv_bytes(context + osl))
    points = [priced_point(step, "lpx", model, context, osl, 1, costs, new_tokens)]
    loaded = min(target, ceiling)
    if loaded > 1:
        points.append(priced_point(step, "lpx", model, context, osl, loaded, costs, new_tokens))
    return {
        "model": model, "system": "lpx", "context": context, "osl": osl, "racks": step.chips / 256,
        "chips": step.chips, "layout": step.name, "streams_accounting": acct.max_streams,
        "streams_compiled": ceiling, "points": points,
    }
