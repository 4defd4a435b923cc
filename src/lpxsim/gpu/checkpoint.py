"""The format a published checkpoint stores each class of matmul in, beside its routed experts.

A 4-bit MoE checkpoint quantises its routed experts, and not necessarily the rest. What the rest is decides
which kernel the engine runs for it and how many bytes it streams: NVIDIA's NVFP4 DeepSeek-R1 keeps MLA's
projections in BF16, so SGLang runs them as BF16 GEMMs, not block-FP8 ones (docs/sources.md "NV-DSR1-FP4").
Assumption "gpu-fp4-moe-checkpoints" in docs/assumptions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from lpxsim.gpu.moe_backend import FOUR_BIT
from lpxsim.specs.model import ModelSpec
from lpxsim.specs.precision import get_precision

# The FFN half's dense matmuls (dense MLP layers, shared experts): 4-bit in a 4-bit MoE checkpoint.
FFN_MATMULS = frozenset({"gate_up", "down", "shared_gate_up", "shared_down"})
# A 4-bit MoE checkpoint whose NVFP4 recipe is not published keeps attention in FP8 (assumed).
UNSOURCED_ATTENTION_FORMAT = "fp8"


@dataclass(frozen=True)
class CheckpointFormats:
    """Storage formats of one checkpoint's non-expert matmuls.

    `dense`: attention projections and MLA's absorbed kv_b weights (and every matmul not in `native`);
    `native`: names of the non-expert matmuls stored in the experts' own format (`weights`)."""

    weights: str
    dense: str
    native: frozenset[str] = frozenset()

    def format_of(self, op_suffix: str) -> str:
        """The storage format of matmul `op_suffix` (a name such as "o_proj" or "shared_down")."""
        return self.weights if op_suffix in self.native else self.dense


def checkpoint_formats(model: ModelSpec, weights: str, dense_weights: str | None = None) -> CheckpointFormats:
    """The formats a checkpoint of `model` whose routed experts (or, for a dense model, all weights) are in
    `weights` stores the rest in; `dense_weights` overrides it (then every non-expert matmul is in it).

    4-bit MoE checkpoints:
    - NVFP4 of an MLA model (NVIDIA's DeepSeek-R1-0528 NVFP4 v2, what InferenceX and TensorRT-LLM's performance
      overview serve): routed experts, shared experts, dense MLP layers and attention's output projection (wo)
      in NVFP4; MLA's q_a, kv_a, q_b and kv_b projections in BF16 (the NVFP4 recipe leaves self-attention
      unquantised, v2 adds wo: "NV-DSR1-FP4"; SGLang's profile of that checkpoint on B200 runs its q_a + kv_a
      projection in the BF16 fused_a_gemm kernel: "SGL-FP4-PROFILE").
    - OpenAI's MXFP4 gpt-oss: only the experts are MXFP4; attention, router, embeddings and head stay BF16 (its
      config's `quantization_config.modules_to_not_convert`: "GPT-OSS-QUANT").
    - any other 4-bit MoE checkpoint: experts, shared experts and dense MLPs 4-bit, attention FP8 (assumed)."""
    weights = get_precision(weights, "weights").name
    if dense_weights is not None:
        return CheckpointFormats(weights, get_precision(dense_weights, "dense_weights").name)
    if not (model.is_moe and weights in FOUR_BIT):
        return CheckpointFormats(weights, weights)
    if model.is_mla and weights == "fp4":
        return CheckpointFormats(weights, "bf16", FFN_MATMULS | {"o_proj"})
    if model.model_type == "gpt_oss" and weights == "mxfp4":
        return CheckpointFormats(weights, "bf16", FFN_MATMULS)
    return CheckpointFormats(weights, UNSOURCED_ATTENTION_FORMAT, FFN_MATMULS)
