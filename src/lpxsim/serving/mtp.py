"""MTP in a pool: a worker that drafts with the model's own multi-token-prediction head.

An `MtpWorker` is a speculative worker (`spec.py`) whose drafter is its own
model's MTP module: no separate pool, no link, nothing shared. A draft token
costs `MTP_DRAFT_FRACTION` of a decode step of the target (one extra layer and
the shared head, as in `steady_state`), a round verifies k + 1 positions, and
each draft is accepted with the pool's acceptance (`mtp_accept`, default the
model's published figure, `lpxsim.specs.mtp`). Works in aggregated and in
disaggregated decode pools (the worker keeps its pool's role).
"""

from __future__ import annotations

import math

from lpxsim.engine.steady_state import MTP_DRAFT_FRACTION
from lpxsim.serving.config import SpeculationConfig
from lpxsim.serving.spec import Link, SpecWorker
from lpxsim.serving.worker import SharedResource
from lpxsim.step.protocol import DecodeBatch, StepCost, StepModel


class MtpHead:
    """The draft cost of a model's own MTP head: a fixed fraction of one of its decode steps."""

    def __init__(self, target: StepModel) -> None:
        self.target = target

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        c = self.target.decode_step(batch)
        return StepCost(c.latency_s * MTP_DRAFT_FRACTION, c.interval_s * MTP_DRAFT_FRACTION)


class MtpWorker(SpecWorker):
    """A replica that decodes in MTP rounds of k drafts + one verify of k + 1 positions."""

    def __init__(self, sim, pool: str, index: int, model: StepModel, sched, role: str, k: int,
                 accept: float) -> None:
        own = Link(f"{pool}[{index}] MTP (on chip)", math.inf, 0.0)
        super().__init__(sim, pool, index, model, sched, MtpHead(model), SharedResource(f"{pool}[{index}].mtp"),
                         own, SpeculationConfig(draft_tokens=k), hidden_bytes=0.0)
        self.role = role
        self.mtp_accept = accept

    def _accepted(self, alpha: float, k: int) -> int:
        return super()._accepted(self.mtp_accept, k)  # the pool's acceptance, not a drafter's per request
