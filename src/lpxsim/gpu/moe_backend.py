"""The MoE backend a serving engine is launched with (a launch setting, not fitted).

The measured tables time several MoE kernels for one shape (gpu/measured.py `MOE_BACKEND_OF`); the engine
runs the one its launch configuration names, and which one it is changes a decode step by up to 2x:
DeepSeek-R1's routed experts on B200 at TP8 (MoE TP8), 8 tokens, FP8 block scales: DeepGEMM 178 us per
layer, the trtllm-gen kernels 74 us.
"""

from __future__ import annotations

FOUR_BIT = frozenset({"fp4", "mxfp4"})


def launch_moe_backend(framework: str, weights: str, dp_attention: bool) -> str | None:
    """The MoE backend InferenceX launches DeepSeek-R1 with, or None (the fastest the tables time).

    TensorRT-LLM (`moe_config.backend`, docs/sources.md "IX-TRT"): TRTLLM, the trtllm-gen kernels, for the
    FP8 checkpoint (dsr1_fp8_b200_trt.sh) and for NVFP4 without attention data-parallelism
    (dsr1_fp4_b200_trt.sh). With attention-DP that script names CUTLASS; priced by aiconfigurator-core's
    CUTLASS NVFP4 table (42 % of HBM bandwidth at 256 tokens, EP4, where trtllm-gen reaches 85 %) its five
    calibration rows come out 22-34 % too slow, and by trtllm-gen 2-18 % too fast, so neither is asserted:
    None (assumption "gpu-moe-backend"). SGLang on Blackwell: `--moe-runner-backend flashinfer_trtllm`, the
    same trtllm-gen kernels ("IX-SGL", "IX-SGL-B300"). Where a GPU's tables lack the backend (Hopper has no
    trtllm-gen kernels: its tables time CUTLASS and Triton) the lookup takes the fastest one timed."""
    if framework == "trtllm":
        return None if (dp_attention and weights in FOUR_BIT) else "trtllm"
    if framework == "sglang":
        return "trtllm"
    return None
