"""Search the parallel layouts of a model on G GPUs for the best one at a stated workload.

Candidates: tp and pp over the power-of-two divisors of G (tp x pp <= G, the rest
data-parallel replicas), ep over the divisors of tp for MoE models, attention
data-parallelism on or off for MoE models, and KV parallelism on or off. Each candidate that fits is
scored with the steady-state closed-loop estimate at the given ISL/OSL and
concurrency: `latency` maximises tok/s per user, `throughput` total tok/s per
GPU. Scoring uses the seam-level steady-state math (`lpxsim.steady_state`), so the
search stays inside the backend without an edge up into `plan`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lpxsim.errors import DoesNotFit, UserError
from lpxsim.gpu.step import GpuStepModel
from lpxsim.steady_state import steady_state

GOALS = ("latency", "throughput")


@dataclass(frozen=True)
class LayoutChoice:
    step: GpuStepModel
    estimate: Any  # lpxsim.steady_state.Estimate


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
    from lpxsim.catalog import get_model

    if goal not in GOALS:
        raise UserError("goal", f"expected one of {', '.join(GOALS)}, got {goal!r}")
    for name, v in (("gpus", gpus), ("isl", isl), ("osl", osl), ("concurrency", concurrency)):
        if not isinstance(v, int) or v < 1:  # a user mistake, not "no layout fits"
            raise UserError(name, f"expected a positive integer, got {v!r}")
    m = get_model(model)
    best: LayoutChoice | None = None
    best_score = float("-inf")
    last_error: UserError | None = None
    for lay in candidate_layouts(m, gpus):
        try:
            step = GpuStepModel(m, system, gpus=gpus, weights=weights, kv=kv, **lay, **step_kw)
            est = steady_state(step, isl, osl, concurrency)
        except UserError as e:  # does not fit, or heads do not split this way
            last_error = e
            continue
        score = est.tok_s_user if goal == "latency" else est.total_tok_s_per_chip
        if score > best_score:
            best, best_score = LayoutChoice(step, est), score
    if best is None:
        why = f" (last: {last_error.message})" if last_error else ""
        raise DoesNotFit("gpus", f"no layout of {m.name} on {gpus} GPUs of {system} fits{why}")
    return best
