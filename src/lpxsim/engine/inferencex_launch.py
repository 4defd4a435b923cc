"""What InferenceX's DeepSeek-R1 launch scripts set that its result rows do not carry.

A row of InferenceX's results names its GPU, engine, precision and layout, and whether it ran speculative
decoding, but not how many tokens a round drafted. The fixed-length MTP scripts fix that count per engine
(IX-MTP-SCRIPTS, `benchmarks/single_node/fixed_seq_len/dsr1_*_mtp.sh`):

- SGLang on NVIDIA GPUs (B200, B300, H200; FP4 and FP8): EAGLE with `--speculative-num-steps 2` and top-k 1,
  two drafts a round;
- SGLang on AMD GPUs (MI355X): `--speculative-num-steps 3`, three drafts;
- TensorRT-LLM: `num_nextn_predict_layers` 3 without attention data-parallelism, 1 with it.

Its disaggregated (Dynamo) runs follow Dynamo's TensorRT-LLM performance-sweep recipes and NVIDIA's srt-slurm
recipes (DYN-TRT-SWEEPS), which InferenceX's multi-node launchers ran: 3 drafts on a decode worker without attention
data-parallelism, and with it 3 while a rank's batch is small (all but one recipe up to 32 sequences a rank, most
at 64) and 1 for large ones (every recipe from 128).

Every one of those scripts sends random-token prompts wrapped in the chat template (`--use-chat-template`),
the conditions of `specs.mtp.CONDITION_ACCEPT["deepseek-r1", "inferencex"]`.

The fixed-length scripts also set how many tokens the server sends at a time (IX-STREAM), so a row's median
inter-token latency spans that many decode steps: SGLang's `--stream-interval` is 10 on H200 and for the FP4
checkpoint on B200 / B300, 30 for FP8 on B200 / B300; TensorRT-LLM's `stream_interval` is 10.
"""

from __future__ import annotations

AMD_GPUS = frozenset({"MI300X", "MI325X", "MI355X"})
CONDITIONS = "inferencex"  # the acceptance conditions of every InferenceX MTP row (specs.mtp.CONDITION_ACCEPT)


# the largest decode batch a rank at which Dynamo's TensorRT-LLM recipes draft 3 tokens with attention DP (DYN-TRT-SWEEPS)
DISAGG_TRT_SMALL_RANK_BATCH = 64


def launch_draft_tokens(hardware: str, framework: str, dp_attention: bool,
                        disagg_rank_batch: float | None = None) -> int | None:
    """Drafts a round InferenceX's launch script gives DeepSeek-R1 MTP on `hardware` under `framework`
    ("sglang" or "trt"/"trtllm"); None for an engine whose script was not read (vLLM, ATOM). A disaggregated
    TensorRT-LLM run with attention DP (`disagg_rank_batch`: the users a decode rank serves) drafts as Dynamo's
    recipes do, the single-node scripts' 1 being for aggregated runs."""
    fw = framework.lower()
    if fw == "sglang":
        return 3 if hardware in AMD_GPUS else 2
    if fw in ("trt", "trtllm"):
        if dp_attention and disagg_rank_batch is not None:
            return 3 if disagg_rank_batch <= DISAGG_TRT_SMALL_RANK_BATCH else 1
        return 1 if dp_attention else 3
    return None


def launch_stream_interval(hardware: str, framework: str, precision: str) -> int | None:
    """Tokens a streamed chunk carries under InferenceX's DeepSeek-R1 launch of `framework` on `hardware` with
    `precision` weights (IX-STREAM); None for a launch whose script was not read (AMD, vLLM)."""
    fw = framework.lower()
    if fw in ("trt", "trtllm"):
        return 10
    if fw != "sglang" or hardware in AMD_GPUS:
        return None
    if hardware in ("B200", "B300"):
        return 30 if precision == "fp8" else 10
    return 10 if hardware == "H200" else None
