"""Optional capabilities a backend may offer beyond `lpxsim.step.protocol.StepModel`.

Attention/FFN disaggregation needs each layer's attention part and FFN part
timed separately, and how many bytes of activation cross the boundary. A
backend that implements `SplitStepModel` can serve as either side of an AFD
pair (the GPU model's attention part and a compiled FFN-only LPX program do). All costs are
for the whole model (all layers); the AFD composite divides by `num_layers`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost


@runtime_checkable
class SplitStepModel(Protocol):
    """A StepModel that can time attention (with its KV) and FFN/MoE separately."""

    @property
    def num_layers(self) -> int: ...

    @property
    def activation_bytes_per_token(self) -> float:
        """Bytes of one token's hidden state sent across the attention/FFN boundary, one way, one layer."""
        ...

    def attention_step(self, batch: DecodeBatch) -> StepCost:
        """Attention (+ norms, embeddings, lm_head) of all layers for one decode step of `batch`."""
        ...

    def attention_prefill(self, chunk: PrefillChunk) -> StepCost:
        """Attention part of all layers for a prefill chunk."""
        ...

    def ffn_step(self, tokens: int) -> StepCost:
        """FFN/MoE of all layers for `tokens` tokens (context does not matter to the FFN)."""
        ...
