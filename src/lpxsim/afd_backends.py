"""The two halves of attention/FFN disaggregation (AFD) on the detailed backends.

FFN side: `LpxFfnStepModel` compiles an FFN-only program (every layer's dense
MLP or MoE block, routed and shared experts included; no attention, no KV, no
embedding or head) onto a stage set of LPUs, through the same compiler,
placement and verifier as a whole model. Its only input is the hidden state
that arrives from the attention side (`lower(..., part="ffn")`).

Attention side: the GPU model prices each step op by op, so it already splits a
step into its attention half and its FFN half (`GpuStepModel.attention_step`,
`attention_prefill`); `gpu_attention_side` builds that model. (The GPU model is
being rebuilt on measured kernels; until then the attention half is the
attention share of the existing model's step breakdown.)

Like `lpxsim.backends`, this sits above the seam: serving builds both halves
through `make_afd_side` and sees only StepModels.
"""

from __future__ import annotations

from lpxsim.errors import UserError
from lpxsim.specs.model import ModelSpec
from lpxsim.stepmodel import DecodeBatch, StepCost, StepModel


def _lpx_ffn_class():
    """`LpxFfnStepModel`, defined lazily so importing this module does not import the compiler."""
    from lpxsim.lpu import LpxStepModel

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


def gpu_attention_side(model: ModelSpec, system: str, gpus: int, tp: int | None, weights: str = "fp8",
                       kv: str = "bf16", kv_layout: str = "separate") -> StepModel:
    """The GPU replica whose attention half serves as the attention side (see module docstring): the one
    place to switch to attention-only GPU steps once the GPU model prices them itself."""
    from lpxsim.gpu import GpuStepModel

    return GpuStepModel(model, system=system, gpus=gpus, tp=tp or gpus, weights=weights, kv=kv,
                        kv_layout=kv_layout)


__all__ = ["gpu_attention_side", "lpx_ffn_side"]
