"""NVIDIA's attention-DP balance run (TRT-ADP-BLOG) against lpxsim: where the DeepSeek-R1 offline gap sits.

    python benchmarks/adp_balance_blog.py

NVIDIA's TensorRT-LLM team ran 16,000 requests (803 input / 3,653 output tokens on average: the MLPerf v5.1
DeepSeek-R1 shape) through DeepSeek-V3 on 8 GB200 with attention data-parallel 8 and expert parallel 8, with and
without the attention-DP balance, and reported the throughput and the "speed of light" throughput at a perfectly
balanced step (TRT-ADP-BLOG). The post does not give the precision, the batch cap or the token budget; this script
prices the run at the caps of NVIDIA's GB200 MLPerf DeepSeek-R1 submission (512 sequences a rank, 4,608 tokens an
iteration, 90 % of free memory for KV: MLC-51-CFG), NVFP4 (that submission's checkpoint) and FP8, through
`engine.offline_run` (the run's own fill and drain). docs/validation.md "Attention data-parallel".

The published figures are printed beside the prediction for comparison only; nothing here is fitted to them.
"""

from __future__ import annotations

import time

from lpxsim.engine.lengths import dataset
from lpxsim.engine.offline_run import offline_run
from lpxsim.gpu.step import GpuStepModel

REQUESTS, MEAN_OUTPUT_TOKENS = 16_000, 3_653  # the post's dataset: 16,000 requests, 3,653 output tokens on average
# published (tok/s of the 8 GPUs): round-robin baseline, balance with timeout 50 + batching wait 10, and the
# post's throughput at a perfectly balanced step for each (SOL TPS)
PUBLISHED_TOK_S = {"baseline (round-robin)": (25_664, 39_552), "balance (timeout 50, batching wait 10)": (34_140, 37_912)}


def main() -> None:
    mix = dataset("deepseek-r1").shaped(float(MEAN_OUTPUT_TOKENS), 20_000)
    print("| weights | predicted tok/s (8 GPUs) | steady state | CPU s |")
    print("|---|---|---|---|")
    predicted = {}
    for weights in ("fp4", "fp8"):
        t0 = time.process_time()
        m = GpuStepModel("deepseek-r1", "gb200-nvl72", tp=8, ep=8, dp_attention=True, weights=weights, kv="fp8",
                         framework="trtllm", mem_fraction=0.9, max_batch=512 * 8)
        run = offline_run(m, mix, REQUESTS, iteration_tokens=4608)
        predicted[weights] = run.output_tok_s
        print(f"| {weights} | {run.output_tok_s:,.0f} | {run.steady.output_tok_s:,.0f} | "
              f"{time.process_time() - t0:.1f} |")
    print()
    print("| published run | tok/s | balanced-step tok/s (SOL) | NVFP4 prediction vs run | vs SOL |")
    print("|---|---|---|---|---|")
    for label, (tps, sol) in PUBLISHED_TOK_S.items():
        p = predicted["fp4"]
        print(f"| {label} | {tps:,} | {sol:,} | {(p / tps - 1) * 100:+.1f} % | {(p / sol - 1) * 100:+.1f} % |")


if __name__ == "__main__":
    main()
