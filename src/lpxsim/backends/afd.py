"""The two halves of attention/FFN disaggregation (AFD) on the detailed backends.

FFN side: `LpxFfnStepModel` compiles an FFN-only program (every layer's dense
MLP or MoE block, routed and shared experts included; no attention, no KV, no
embedding or head) onto a stage set of LPUs, through the same compiler,
placement and verifier as a whole model. Its only input is the hidden state
that arrives from the attention side (`lower(..., part="ffn")`).

Attention side: the GPU model prices each step op by op, so it splits a step
into its attention half and its FFN half; `gpu_attention_side` builds it with
`part="attention"` (every step it answers is the attention half plus the
engine's per-step host work) and a memory budget that holds only what the
attention side stores: attention weights, norms, embedding and LM head (the
FFN-only program has neither) and the KV. The FFN/MoE weights live on the
FFN side, so they leave the attention GPUs' HBM to KV.

Like `lpxsim.backends.factory`, this sits above the seam: serving builds both halves
through `make_afd_side` and sees only StepModels.
"""

from __future__ import annotations

from lpxsim.core.errors import UserError
from lpxsim.specs.model import ModelSpec
from lpxsim.step.protocol import DecodeBatch, StepCost, StepModel


def _lpx_ffn_class():
    """`LpxFfnStepModel`, defined lazily so importing this module does not import the compiler."""
    from lpxsim.lpu import LpxStepModel
    from lpxsim.lpu.compiler import Target

    class LpxFfnStepModel(LpxStepModel):
        """The FFN/MoE half of `model`, compiled onto LPUs (one replica; context plays no part). The part is
        in every cache key of the base class, so its layouts and steps never mix with the whole model's."""

        part = "ffn"

        @property
        def name(self) -> str:
            return f"{self.model.name} FFN on {self.system.name} ({self.layout.describe()})"

        @property
        def num_layers(self) -> int:
            return self.model.num_layers

        @property
        def activation_bytes_per_token(self) -> float:
            return 2.0 * self.model.hidden_size

        def _choice_context(self, target: Target) -> int:
            return 0  # the context ffn_step prices at: the layout check's compile is its batch-1 step

        def ffn_step(self, tokens: int) -> StepCost:
            """FFN/MoE of all layers for `tokens` tokens, from the compiled FFN-only program."""
            return self._cost("decode", max(1, int(tokens)), 0, 1)

        def kv_bytes(self, context: int) -> float:
            return 0.0

        def kv_capacity_bytes(self) -> float:
            return 0.0

        def max_batch(self) -> int:
            return 1024

        def decode_step(self, batch: DecodeBatch) -> StepCost:
            raise UserError("pools.ffn", "an FFN-only replica serves only as the FFN side of an AFD pair")

        prefill = verify = decode_step  # type: ignore[assignment]

    return LpxFfnStepModel


def lpx_ffn_side(model: ModelSpec, system: str, racks: float | None = None, chips: int | None = None,
                 weights: str = "fp8", kv: str = "bf16") -> StepModel:
    """The compiled FFN-only LPX replica on `racks` or `chips` of `system` (its layout from the compiler's
    search; every step compiled at context 0, since no FFN op reads the KV)."""
    cls = _lpx_ffn_class()
    return cls(model, system=system, racks=racks, chips=chips, weights=weights, kv=kv, context=1,
               concurrency=1, context_grid=(0,))


def _gpu_attention_class():
    """`GpuAttentionStepModel`, defined lazily so importing this module does not import the GPU model."""
    from dataclasses import replace

    from lpxsim.gpu import GpuStepModel
    from lpxsim.gpu import memory as gmem

    class GpuAttentionStepModel(GpuStepModel):
        """The GPU model with part="attention" whose HBM holds only the attention side's weights and KV."""

        def _budget(self, mem_fraction: float):
            full = gmem.budget(self.model, self.layout, float(self.system.chip.memory_bytes), self.weights,
                               mem_fraction, self.prefill_chunk, self.logits_batch, self.dense_weights,
                               self.formats.native)
            w = gmem.attention_weight_bytes_per_gpu(self.model, self.layout, self.weights, self.dense_weights,
                                                    self.formats.native)
            free = full.hbm_bytes - w - full.activation_bytes
            kv = free * mem_fraction if free > 0 else free
            b = replace(full, weight_bytes=w, kv_bytes=kv,
                        usable_bytes=full.hbm_bytes - max(free, 0.0) * (1.0 - mem_fraction))
            if not b.fits:
                from lpxsim.core.errors import DoesNotFit

                raise DoesNotFit("gpus", f"{self.model.name}'s attention side at {self.weights} needs "
                                         f"{w / 1e9:,.1f} GB of weights per GPU with {self.layout.label()}; a "
                                         f"{self.system.chip.name} has {full.hbm_bytes / 1e9:,.1f} GB")
            return b

        @property
        def name(self) -> str:
            return f"{super().name} attention"

    return GpuAttentionStepModel


def gpu_attention_side(model: ModelSpec, system: str, gpus: int, tp: int | None, weights: str = "fp8",
                       kv: str = "bf16", kv_layout: str = "separate") -> StepModel:
    """The GPU replica of the attention side (see module docstring): attention-only steps, and an HBM
    budget of attention weights + KV."""
    return _gpu_attention_class()(model, system=system, gpus=gpus, tp=tp or gpus, weights=weights, kv=kv,
                                  kv_layout=kv_layout, part="attention")


__all__ = ["gpu_attention_side", "lpx_ffn_side"]
