"""A replica seen through a prefix cache: requests prefill only the input tokens not already cached."""

from __future__ import annotations

from lpxsim.core.errors import UserError
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost, StepModel


class PrefixCachedStep:
    """A replica whose requests find all but their last `new_tokens` input tokens in the prefix cache.

    An agentic turn re-sends the session so far: its KV is kept (it counts against the KV ceiling at the
    full context) and only the new tokens are prefilled, over the cached context. Prefill chunks that lie
    wholly inside the cached prefix cost nothing; everything else is the wrapped step model's.
    """

    def __init__(self, step: StepModel, isl: int, new_tokens: int) -> None:
        if not 0 < new_tokens <= isl:
            raise UserError("new_tokens", f"expected 1..{isl:,} new input tokens per request, got {new_tokens!r}")
        self.step, self.cached = step, isl - new_tokens

    name = property(lambda self: self.step.name)
    chips = property(lambda self: self.step.chips)
    power_w = property(lambda self: self.step.power_w)

    @property
    def cached_tokens(self) -> int:
        """Input tokens each request finds in the cache (its prefill starts here: `steady_state.prefill_cost`)."""
        return self.cached

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        return self.step.decode_step(batch)

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        end = chunk.context + chunk.tokens
        if end <= self.cached:
            return StepCost(0.0, 0.0)
        if chunk.context < self.cached:  # the chunk straddles the cache boundary: prefill only its new part
            chunk = PrefillChunk(end - self.cached, self.cached, chunk.sequences)
        return self.step.prefill(chunk)

    def verify(self, batch: DecodeBatch, k: int) -> StepCost:
        return self.step.verify(batch, k)

    def kv_capacity_bytes(self) -> float:
        return self.step.kv_capacity_bytes()

    def kv_bytes(self, context: int) -> float:
        return self.step.kv_bytes(context)

    def max_batch(self) -> int:
        return self.step.max_batch()
