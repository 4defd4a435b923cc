"""MTP in a pool: a worker that drafts with the model's own multi-token-prediction head.

An `MtpWorker` is a speculative worker (`spec.py`) whose drafter is its own model's MTP module: no
separate pool, no link, nothing shared. A round costs what `step.speculative.mtp_round_s` says (verify
k + 1 positions, the MTP draft passes, the engine's per-round overhead), the function the steady state
uses, and draft position i is accepted with the pool's conditional acceptance a_i (`mtp_accept`: one rate,
or the model's published per-position profile, `lpxsim.specs.mtp`). Works in aggregated and in
disaggregated decode pools (the worker keeps its pool's role).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lpxsim.serving.config import SpeculationConfig
from lpxsim.serving.spec import Link, SpecWorker
from lpxsim.serving.worker import SharedResource, ctx_bucket
from lpxsim.specs.mtp import accepted_drafts, profile
from lpxsim.step.protocol import DecodeBatch, StepCost, StepModel
from lpxsim.step.speculative import MTP_DRAFT_FRACTION, mtp_round_s


class MtpHead:
    """The draft cost of a model's own MTP head: a fixed fraction of one of its decode steps (used only
    for the drafter-slot count of `SpecWorker`; the round time is `mtp_round_s`)."""

    def __init__(self, target: StepModel) -> None:
        self.target = target

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        c = self.target.decode_step(batch)
        return StepCost(c.latency_s * MTP_DRAFT_FRACTION, c.interval_s * MTP_DRAFT_FRACTION)


class MtpWorker(SpecWorker):
    """A replica that decodes in MTP rounds of k drafts + one verify of k + 1 positions."""

    def __init__(self, sim, pool: str, index: int, model: StepModel, sched, role: str, k: int,
                 accept: float | Sequence[float]) -> None:
        own = Link(f"{pool}[{index}] MTP (on chip)", math.inf, 0.0)
        # the pool's role from the start: a decode pool's worker takes hand-offs as any decode worker does
        super().__init__(sim, pool, index, model, sched, MtpHead(model), SharedResource(f"{pool}[{index}].mtp"),
                         own, SpeculationConfig(draft_tokens=k), hidden_bytes=0.0, role=role)
        self.mtp_accept = accept
        self._rates = profile(accept, max(k, 1))

    def round_time(self, n: int, ctx: float, k: int) -> float:
        """One MTP round for `n` sequences at mean context `ctx` (the steady state's `mtp_round_s`)."""
        c = ctx_bucket(ctx)
        key = (n, c, k)
        t = self._round.get(key)
        if t is None:
            t = self._round[key] = mtp_round_s(self.model, DecodeBatch.uniform(n, c), k)
        return t

    def _accepted(self, alpha: float, k: int) -> int:
        """Leading drafts accepted, position i with the pool's conditional acceptance a_i."""
        rates = self._rates if k <= len(self._rates) else profile(self.mtp_accept, k)
        return accepted_drafts(rates[:k], [self._uniform() for _ in range(k)])

    def _accepted_all(self, active: list, k: int) -> list[int]:
        """`_accepted` of every active sequence at once: the same k draws a sequence, in the same order, judged
        together (a round of a thousand sequences had spent most of a large run's time drawing them one by one)."""
        n = len(active)
        if n == 0 or k <= 0:
            return [0] * n
        rates = self._rates if k <= len(self._rates) else profile(self.mtp_accept, k)
        passed = np.asarray(self._uniforms(n * k)).reshape(n, k) < np.asarray(rates[:k])
        return np.cumprod(passed, axis=1).sum(axis=1).tolist()  # leading passes: the first rejection ends a round
