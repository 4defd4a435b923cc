"""Step models for the bench layer, built once per process through the one backend factory.

The bench layer sees backends only through the StepModel seam and
`lpxsim.backends.make_step_model`. A backend that is not part of this build
raises `BackendUnavailable`, so that callers (the tour) can say so honestly
instead of inventing numbers.
"""

from __future__ import annotations

from functools import cache

from lpxsim.errors import UserError
from lpxsim.stepmodel import StepModel


class BackendUnavailable(UserError):
    """The backend needed for a system is not importable in this build (reported, never papered over)."""


@cache
def step_model(model: str, system: str, weights: str = "fp8", kv: str = "bf16") -> StepModel:
    """StepModel of `model` on `system` with the backend's default layout (one rack / NVL72 domain)."""
    from lpxsim.backends import make_step_model

    try:
        return make_step_model(model, system, weights=weights, kv=kv)
    except ImportError as e:
        raise BackendUnavailable("system", f"the backend for {system} is not available in this build: {e}") from None


def hardware_label(step: StepModel) -> str:
    """'<name>: 256 chips, 190.0 kW' -- printed next to every per-user speed."""
    return f"{step.name}: {step.chips} chips, {step.power_w / 1e3:,.1f} kW"
