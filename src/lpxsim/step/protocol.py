"""The seam between hardware backends (lpu, gpu) and the serving simulator.

`serving` sees only this protocol. A backend answers: how long one decode step
of a batch takes (latency of one token through the whole model, and the
initiation interval at which a new micro-batch may enter), how long a prefill
chunk takes, how long verifying k draft tokens takes, and how much KV fits.
On a GPU latency == interval; on an LPX rack pipelined over chip groups the
interval is shorter, so several micro-batches are in flight at once: that is
why batch-1 speed and fleet capacity are different numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class DecodeBatch:
    """One decode step: one new token for each sequence, at its current context length."""

    contexts: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.contexts)

    @classmethod
    def uniform(cls, batch: int, context: int) -> DecodeBatch:
        return cls(tuple([context] * batch))


@dataclass(frozen=True)
class PrefillChunk:
    """A prefill chunk: `tokens` new tokens per sequence over `context` already-cached tokens."""

    tokens: int
    context: int = 0
    sequences: int = 1


@dataclass(frozen=True)
class StepCost:
    """Cost of one step. `latency_s`: first input to last output; `interval_s`: time until the
    next micro-batch may enter (== latency on a GPU without pipeline parallelism; shorter on a pipelined LPX
    or a GPU layout with pipeline stages)."""

    latency_s: float
    interval_s: float

    @classmethod
    def serial(cls, seconds: float) -> StepCost:
        return cls(seconds, seconds)


@runtime_checkable
class StepModel(Protocol):
    """What the serving layer needs from a hardware backend (one replica of a model)."""

    @property
    def name(self) -> str: ...

    @property
    def chips(self) -> int:
        """Accelerators this replica occupies."""
        ...

    @property
    def power_w(self) -> float:
        """Power of the hardware this replica occupies (its share of racks)."""
        ...

    def decode_step(self, batch: DecodeBatch) -> StepCost: ...

    def prefill(self, chunk: PrefillChunk) -> StepCost: ...

    def verify(self, batch: DecodeBatch, k: int) -> StepCost:
        """Score k draft tokens (+1 bonus position) for each sequence of `batch`."""
        ...

    def kv_capacity_bytes(self) -> float:
        """KV bytes this replica can hold across all its sequences."""
        ...

    def kv_bytes(self, context: int) -> float:
        """KV bytes one sequence of `context` tokens occupies (window-capped where the model is)."""
        ...

    def max_batch(self) -> int:
        """Largest decode batch the backend supports (activation/buffer limits)."""
        ...
