"""Serving-engine behaviour per framework (SGLang, TensorRT-LLM, vLLM): a few named parameters.

Hardware is in the measured kernel tables; what the engine adds on top is not:
host time per engine step (scheduling, sampling, detokenising, the CPU-GPU sync),
host time to a request's first token that does not hold the GPUs, and the batch
sizes at which decode CUDA graphs are captured (a decode step of B sequences
runs the graph of the next captured size, so its GEMMs and attention see the
padded batch). The two overheads are fitted per framework on the calibration
data (benchmarks/fit_gpu.py, catalog/fitted/gpu_fit.json "engines"); the graph
batch lists are the engines' defaults (docs/sources.md, not fitted). The per-step host time is also fitted per
release, a release being the month of a run (`releases`): the engines shed host time release by release, so an
answer prices the latest release's, a replayed measurement the release of its own date (`engine_params`,
assumption "engine-release"). With
attention data-parallelism TensorRT-LLM holds new prefills until every DP rank
has one, for at most `adp_balance_timeout_iters` engine steps (its
attention_dp_config balance; InferenceX launches it with a timeout of 60
steps): a launch setting, not fitted. Nothing here is a GPU's hardware figure; where an engine behaves
differently by GPU (its request polling on Blackwell, its absorbed-BMM format on CUDA), the field names the GPUs.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from typing import Any

from lpxsim.core.frameworks import ALIASES as ALIASES
from lpxsim.core.frameworks import FRAMEWORKS as FRAMEWORKS
from lpxsim.core.frameworks import LATEST as LATEST
from lpxsim.core.frameworks import POOLED as POOLED
from lpxsim.core.frameworks import framework_name as framework_name
from lpxsim.core.frameworks import release_name


def _sglang_graph_batches() -> tuple[int, ...]:
    # SGLang server_args: [1, 2, 4, 8, 12] + range(16, 257, 8) (cuda_graph_max_bs 256 on large GPUs)
    return (1, 2, 4, 8, 12, *range(16, 257, 8))


def _trtllm_graph_batches() -> tuple[int, ...]:
    # TensorRT-LLM CudaGraphConfig(enable_padding=True): 1, 2, 4, then multiples of 8 up to 128, then of 128
    return (1, 2, 4, *range(8, 129, 8), *range(256, 1025, 128))


def trtllm_capture_sizes(sizes: tuple[int, ...], max_batch_size: int, max_num_tokens: int, draft_tokens: int = 0,
                         padding: bool = True) -> tuple[int, ...]:
    """The decode CUDA graphs TensorRT-LLM captures from the batch sizes a launch gives (TRT-GRAPH-FILTER,
    `_filter_cuda_graph_batch_sizes`): those up to the largest pure-decode batch the launch can run, min(max batch
    size, token budget // (1 + draft tokens)); with padding on, that largest batch too where a given size exceeds
    it (a batch padded to a size it cannot run is padded to the largest it can)."""
    top = min(max_batch_size, max_num_tokens // (1 + draft_tokens))
    kept = [b for b in sorted(set(sizes)) if b <= top]
    if padding and top >= 1 and any(b > top for b in sizes) and (not kept or kept[-1] != top):
        kept.append(top)
    return tuple(kept)


def _vllm_graph_batches() -> tuple[int, ...]:
    # vLLM compilation config: 1, 2, 4, then multiples of 8 up to 512
    return (1, 2, 4, *range(8, 513, 8))


@dataclass(frozen=True)
class EngineParams:
    """One framework's engine parameters (seconds; graph batch sizes)."""

    name: str
    step_overhead_s: float  # host time per engine step (fitted; per release where the fit has releases)
    first_token_overhead_s: float  # host time before a first token that does not hold the GPUs (fitted)
    graph_batches: tuple[int, ...]  # decode CUDA-graph capture sizes (engine default, not fitted)
    # DP-attention admission balance: steps a new prefill may be held waiting for every attention-DP
    # rank to have one (0: admitted at once). A launch setting, not fitted.
    adp_balance_timeout_iters: int = 0
    # Scheduler request polling: (GPU names, concurrency threshold, interval below it, interval at or above it).
    # SGLang's --scheduler-recv-interval N makes the scheduler read new requests only every N decode steps
    # (SchedulerRecvSkipper: a decode step counts 1, a prefill 1000, so it polls right after any prefill).
    # InferenceX starts SGLang on HGX B200/B300 with N = 10 below 16 users and 30 from 16 (dsr1_fp{4,8}_b200.sh,
    # dsr1_fp4_b300.sh; not set on Hopper): a launch setting, not fitted. None: polls every step.
    recv_interval: tuple[tuple[str, ...], int, int, int] | None = None
    # Engine passes an MTP round launches besides the verify: SGLang's EAGLE worker runs the draft steps
    # and the draft-extend as their own forward passes (their own CUDA graphs) after the target's verify;
    # TensorRT-LLM captures verify and draft in one graph (TRT-BLOG2). Each extra pass is priced at the
    # engine's fitted per-step host time (assumption "mtp-round-overhead").
    spec_extra_passes: int = 0
    # Whether the engine schedules an MTP round's host work while the GPU runs the previous round, so that the
    # extra passes' host time is hidden and a round costs one step's host time, as a decode step does under the
    # overlap scheduler: SGLang's spec v2 (SGLANG_ENABLE_SPEC_V2; SGL-11398, SGL-9588), its default since
    # SGL-21062 (2026-03-21) and exported by InferenceX's H200, B200 FP4 and MI355X MTP launches (IX-MTP-SCRIPTS).
    spec_overlap: bool = False
    # Prompt tokens one prefill pass packs, per (GPU names, weights, tensor-parallel size): SGLang's
    # --chunked-prefill-size as InferenceX launches DeepSeek-R1 (HGX B200/B300: 16,384 for the FP4 checkpoint,
    # FP8 32,768 at TP8 and 8,192 at TP4, IX-SGL, IX-SGL-B300; H200 FP8 32,768, IX-SGL-H200; MI300X and MI325X
    # 131,072 and MI355X 196,608 at FP8 TP8, IX-AMD-SGL). A launch setting, not fitted.
    prefill_pass: tuple[tuple[tuple[str, ...], str, int, int], ...] = ()
    # Whether a prefill pass runs eagerly, op by op from Python (SGLang and TensorRT-LLM capture CUDA graphs
    # for decode batches only: SGL-GRAPH, TRT-GRAPH), so that its host dispatch bounds it from below
    # (`GpuStepModel.prefill_dispatch_s`). vLLM V1 compiles the model and replays piecewise CUDA graphs
    # for prefill token counts up to its capture sizes (VLLM-GRAPH): False.
    eager_prefill: bool = True
    # Whether a prefill batch runs as its own forward pass, the running decodes waiting for it (SGLang:
    # --enable-mixed-chunk is off by default, SGL-MIXED, and InferenceX's launches leave it off), so its first
    # token is out when the prefill ends; False where an iteration carries context and generation requests
    # together (TensorRT-LLM, TRT-SCHED; vLLM's chunked prefill) and the token comes with the iteration.
    prefill_alone: bool = False
    # The GPU vendors on which MLA's absorbed BMMs of a 128x128 block-FP8 checkpoint run in BF16: SGLang on CUDA
    # dequantises kv_b_proj to BF16 at load and runs W_UK / W_UV with torch.bmm, unless SGL_USE_DEEPGEMM_BMM (off
    # by default, never with Blackwell's DeepGEMM) selects DeepGEMM's FP8 BMM; on ROCm it requantises them to
    # per-tensor FP8 for bmm_fp8 (SGL-MLA-BMM). A code path, not fitted.
    bf16_absorb_vendors: tuple[str, ...] = ()
    # The release whose fitted host time this is: a month "YYYY-MM", or POOLED (the fit over every release)
    release: str = POOLED

    def graph_batch(self, batch: int) -> int:
        """The captured batch a decode step of `batch` sequences runs at (itself beyond the largest)."""
        i = bisect.bisect_left(self.graph_batches, batch)
        return self.graph_batches[i] if i < len(self.graph_batches) else batch

    def with_values(self, **kw: Any) -> EngineParams:
        return replace(self, **kw)


_BLACKWELL = ("B200", "B300")  # the HGX Blackwell GPUs InferenceX launches SGLang on with one recipe (IX-SGL-B300)

# Priors (before the fit, and the fallback without a fit file): a 1 ms engine step and 50 ms to the
# first token, the order reported for SGLang/vLLM schedulers (assumption "gpu-engine-priors").
PRIORS = {
    "sglang": EngineParams("sglang", 1e-3, 0.05, _sglang_graph_batches(),
                           recv_interval=(_BLACKWELL, 16, 10, 30), spec_extra_passes=2, spec_overlap=True,
                           prefill_alone=True, bf16_absorb_vendors=("NVIDIA",),
                           prefill_pass=((_BLACKWELL, "fp4", 4, 16384), (_BLACKWELL, "fp4", 8, 16384),
                                         (_BLACKWELL, "fp8", 4, 8192), (_BLACKWELL, "fp8", 8, 32768),
                                         (("H200 SXM",), "fp8", 8, 32768), (("MI300X", "MI325X"), "fp8", 8, 131072),
                                         (("MI355X",), "fp8", 8, 196608))),
    # attention_dp_config {enable_balance: true, timeout_iters: 60, batching_wait_iters: 0}: the
    # TRT-LLM launch scripts of InferenceX (dsr1_fp8_b200_trt.sh, dsr1_fp4_b200_trt.sh; docs/sources.md)
    "trtllm": EngineParams("trtllm", 1e-3, 0.05, _trtllm_graph_batches(), adp_balance_timeout_iters=60),
    "vllm": EngineParams("vllm", 1e-3, 0.05, _vllm_graph_batches(), eager_prefill=False),
}
FITTED = ("step_overhead_s", "first_token_overhead_s")
RELEASE_FITTED = ("step_overhead_s",)  # what the fit gives each release (the rest is the engine's pooled fit)


def release_month(releases: dict[str, Any], release: str | None) -> str | None:
    """The fitted release (a month "YYYY-MM" of `releases`) that `release` names: LATEST the latest; a date
    "YYYY-MM[-DD]" the latest release not after it; None (the pooled fit) for POOLED or None, for a date before
    every fitted release (software older than the calibration) and where the engine has no releases."""
    if release is None:
        return None
    release = release_name(release, "date")
    if release == POOLED or not releases:
        return None
    months = sorted(releases)
    if release == LATEST:
        return months[-1]
    month = release[:7]
    before = [m for m in months if m <= month]
    return before[-1] if before else None


def engine_params(name: str, release: str | None = LATEST) -> EngineParams:
    """The fitted parameters of one framework (priors where the fit file has none), with the per-step host time of
    the release `release` names (`release_month`: by default the latest, what a deployment runs now)."""
    from lpxsim.gpu.params import load_fit

    key = framework_name(name)
    fitted = load_fit().get("engines", {}).get(key, {})
    values: dict[str, Any] = {k: float(v) for k, v in fitted.items() if k in FITTED}
    month = release_month(fitted.get("releases", {}), release)
    if month is not None:
        values.update({k: float(v) for k, v in fitted["releases"][month].items() if k in RELEASE_FITTED})
    return PRIORS[key].with_values(**values, release=month or POOLED)
