"""Search the parallel layouts of a model on G GPUs for the best one at a stated workload.

Candidates: tp and pp over the power-of-two divisors of G (tp x pp <= G, the rest
data-parallel replicas), ep over the divisors of tp for MoE models, attention
data-parallelism on or off for MoE models, and KV parallelism on or off. Each candidate that fits is
scored with the steady-state closed-loop estimate at the given ISL/OSL and
concurrency: `latency` maximises tok/s per user, `throughput` total tok/s per
GPU. A candidate whose decode step alone bounds its score below the best found is
not priced further (the answer is the one a full scan gives). Scoring uses the
seam-level steady-state math (`lpxsim.engine.steady_state`), so the search stays inside
the backend without an edge up into `plan`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.engine.steady_state import decode_period, steady_state
from lpxsim.gpu.step import GpuStepModel

GOALS = ("latency", "throughput")


@dataclass(frozen=True)
class LayoutChoice:
    step: GpuStepModel
    estimate: Any  # lpxsim.engine.steady_state.Estimate


def _pow2_divisors(n: int) -> list[int]:
    out, d = [], 1
    while d <= n:
        if n % d == 0:
            out.append(d)
        d *= 2
    return out


def candidate_layouts(model: Any, gpus: int) -> list[dict[str, Any]]:
    """(tp, ep, pp, dp_attention, kv_parallel) combinations worth trying on `gpus` GPUs."""
    moe = model.is_moe
    out = []
    for tp in _pow2_divisors(gpus):
        for pp in _pow2_divisors(gpus // tp):
            for ep in (_pow2_divisors(tp) if moe else [1]):
                for dp in ((False, True) if moe and tp > 1 else (False,)):
                    out.append({"tp": tp, "ep": ep, "pp": pp, "dp_attention": dp})
                    if tp > 1 and not dp:
                        out.append({"tp": tp, "ep": ep, "pp": pp, "dp_attention": False, "kv_parallel": True})
    return out


def best_layout(model: Any, system: str = "h200-hgx", gpus: int = 8, goal: str = "latency", **kw: Any) -> GpuStepModel:
    """The GpuStepModel of the best layout (see `search_layouts`; isl/osl/concurrency default to 1k/1k/1)."""
    return search_layouts(model, system, gpus, goal, **kw).step


def search_layouts(
    model: Any,
    system: str = "h200-hgx",
    gpus: int = 8,
    goal: str = "latency",
    isl: int = 1024,
    osl: int = 1024,
    concurrency: int = 1,
    weights: str = "fp8",
    kv: str = "bf16",
    **step_kw: Any,
) -> LayoutChoice:
    """The best-scoring layout that fits; DoesNotFit if none does."""
    from lpxsim.catalog import get_model, get_system

    if goal not in GOALS:
        raise UserError("goal", f"expected one of {', '.join(GOALS)}, got {goal!r}")
    for name, v in (("gpus", gpus), ("isl", isl), ("osl", osl), ("concurrency", concurrency)):
        if not isinstance(v, int) or v < 1:  # a user mistake, not "no layout fits"
            raise UserError(name, f"expected a positive integer, got {v!r}")
    m = get_model(model)
    spec = get_system(system)  # once, not once per candidate
    # Every candidate's decode step first: a user's token period can never beat the pure decode period
    # (TPOT >= period; see `_score_bound`), so a layout whose bound is below the best score found so far
    # is not priced further (its prefill chunks are most of a layout's pricing). Candidates are scored
    # in order of their bound, and ties go to the earlier candidate, as a plain scan in order would.
    built: list[tuple[float, int, GpuStepModel]] = []
    errors: dict[int, UserError] = {}
    for i, lay in enumerate(candidate_layouts(m, gpus)):
        try:
            step = GpuStepModel(m, spec, gpus=gpus, weights=weights, kv=kv, **lay, **step_kw)
        except UserError as e:  # does not fit, or heads do not split this way
            errors[i] = e
            continue
        built.append((_score_bound(step, goal, isl, osl, concurrency), i, step))
    best: LayoutChoice | None = None
    best_score, best_i = float("-inf"), -1
    for bound, i, step in sorted(built, key=lambda b: (-b[0], b[1])):
        if best is not None and bound * (1.0 + 1e-9) < best_score:
            break  # sorted by bound: no later candidate can win either
        try:
            est = steady_state(step, isl, osl, concurrency)
        except UserError as e:
            errors[i] = e
            continue
        score = est.tok_s_user if goal == "latency" else est.total_tok_s_per_chip
        if score > best_score or (score == best_score and i < best_i):
            best, best_score, best_i = LayoutChoice(step, est), score, i
    if best is None:
        last_error = errors[max(errors)] if errors else None
        why = f" (last: {last_error.message})" if last_error else ""
        raise DoesNotFit("gpus", f"no layout of {m.name} on {gpus} GPUs of {system} fits{why}")
    return best


def _score_bound(step: GpuStepModel, goal: str, isl: int, osl: int, concurrency: int) -> float:
    """An upper bound on the layout's score from its decode step alone (inf where none is known).

    `steady_state`'s decode phase is D = (OSL - 1) x period + (the other users' prefill time it overlaps) >=
    (OSL - 1) x period: TPOT >= period (latency) and E2E > (OSL - 1) x period (throughput)."""
    if osl <= 1:
        return math.inf
    try:
        period, _ = decode_period(step, concurrency, isl + osl // 2)  # the call steady_state makes
    except UserError:  # let the full estimate say why, in its own order
        return math.inf
    if not period > 0.0:  # (NaN too)
        return math.inf
    if goal == "latency":
        return 1.0 / period
    return concurrency * (isl + osl) / ((osl - 1) * period) / max(1, step.chips)
