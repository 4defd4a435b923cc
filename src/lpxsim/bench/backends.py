"""Step models for the bench layer, built once per process through the one backend factory.

The bench layer sees backends only through the StepModel seam and
`lpxsim.backends.factory.make_step_model`. A backend that is not part of this build
raises `BackendUnavailable`, so that callers (the tour) can say so honestly
instead of inventing numbers.

Two kinds of deployment:
- `step_model(model, system)`: the backend's default layout (LPX: one deployment
  compiled for long context at concurrency 1, as the AA endpoint; GPU: the
  latency pick for a short workload). The AA benchmark runs on it.
- `workload_step_model(model, system, context, osl)`: the engine's default
  deployment for that workload (`lpxsim.engine.deployment`). A sweep point at that
  context, whatever its concurrency, runs on it, as a deployment serves every load.
"""

from __future__ import annotations

from functools import cache

from lpxsim.core.errors import UserError
from lpxsim.step.protocol import StepModel


class BackendUnavailable(UserError):
    """The backend needed for a system is not importable in this build (reported, never papered over)."""


@cache
def step_model(model: str, system: str, weights: str = "fp8", kv: str = "bf16", isl: int | None = None,
               osl: int | None = None, concurrency: int = 1, racks: float | None = None,
               framework: str = "sglang") -> StepModel:
    """StepModel of `model` on `system`: the backend's default layout when no workload is given, else the
    layout the backend picks for `concurrency` streams of `isl` + `osl` tokens (LPX: compiled at that
    workload's own contexts, `racks` racks). `framework`: the serving engine of a GPU system."""
    from lpxsim.backends.factory import Layout, make_step_model
    from lpxsim.catalog import get_system

    try:
        sys_ = get_system(system)
        lpu = sys_.is_lpu
        fw = {} if lpu else {"framework": framework}
        if isl is None:
            return make_step_model(model, system, Layout(**fw), weights=weights, kv=kv)
        gpus = None if lpu or racks is None else int(racks * sys_.chips_per_unit)
        lay = Layout(racks=racks if lpu else None, gpus=gpus, isl=isl, osl=osl, concurrency=concurrency,
                     workload_grid=lpu, **fw)
        return make_step_model(model, system, lay, weights=weights, kv=kv)
    except ImportError as e:
        raise BackendUnavailable("system", f"the backend for {system} is not available in this build: {e}") from None


def unit_ceiling(model: str, system: str, context: int, weights: str = "fp8", kv: str = "bf16") -> tuple[int, int]:
    """(units that hold the weights plus one stream, streams of `context` tokens that fit them) from
    the memory capacity model (plan.capacity)."""
    from lpxsim.plan.capacity import capacity

    units = max(1, capacity(model, system, context, weights=weights, kv=kv).units_needed)
    return units, capacity(model, system, context, weights=weights, kv=kv, racks=float(units)).max_streams


def workload_step_model(model: str, system: str, context: int, osl: int, weights: str = "fp8",
                        kv: str = "bf16", framework: str = "sglang") -> StepModel:
    """The replica a sweep at `context` runs on: the engine's default deployment for ISL `context`, OSL `osl`
    (`lpxsim.engine.deployment.place`: the fewest whole units that hold the model, laid out once for the
    workload)."""
    from lpxsim.engine.deployment import Precision, place
    from lpxsim.engine.query import Workload

    try:
        return place(model, system, Workload(int(context), int(osl)), None, Precision(weights, kv),
                     framework=framework).step
    except ImportError as e:
        raise BackendUnavailable("system", f"the backend for {system} is not available in this build: {e}") from None


def hardware_label(step: StepModel) -> str:
    """'<name>: 256 chips, 190.0 kW' -- printed next to every per-user speed."""
    return f"{step.name}: {step.chips} chips, {step.power_w / 1e3:,.1f} kW"
