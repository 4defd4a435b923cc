"""GpuStepModel: the GPU backend behind the StepModel seam.

One object covers `gpus` GPUs: `replicas` copies of a tp x pp replica behind a
router that balances sequences evenly. A decode step of B sequences costs one
replica's step at ceil(B / replicas) sequences; a prefill chunk occupies the
replicas it needs, so its initiation interval is its latency times the share of
the replicas it keeps busy. On a single replica latency == interval, as on any
GPU engine (no layer pipelining across micro-batches).
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from dataclasses import replace

from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.gpu import memory
from lpxsim.gpu.checkpoint import checkpoint_formats
from lpxsim.gpu.collectives import fabric_for
from lpxsim.gpu.cost import StepBreakdown, price, roofline_s
from lpxsim.gpu.engine import LATEST, engine_params, framework_name
from lpxsim.gpu.features import GraphPlan, StepFeatures, build, plan_step, with_contexts
from lpxsim.gpu.layout import Layout
from lpxsim.gpu.measured import AIC_SYSTEM, MOE_BACKEND_OF, aic_version, measured_ops
from lpxsim.gpu.moe_backend import launch_moe_backend
from lpxsim.gpu.params import GpuParams, fitted_params
from lpxsim.graph import Phase
from lpxsim.specs.accounting import kv_bytes_per_sequence
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec
from lpxsim.specs.precision import get_precision
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost

MOE_BACKENDS = frozenset(MOE_BACKEND_OF.values())
# running sequences per scheduler: per replica, and per attention-DP rank where ranks schedule their own requests
# (TensorRT-LLM's max_batch_size is a rank's; SGLang/vLLM cap their CUDA-graph batch near this)
DEFAULT_MAX_BATCH = 1024
DEFAULT_PREFILL_CHUNK = 8192
# Achieved/peak matmul ratio when the catalog has no MAMF figure for a chip: mean of the
# measured MAMF table in hardware.md §9 (NVIDIA parts 72-80%). Assumption "gpu-mamf-default".
MAMF_DEFAULT = 0.75
_CACHE_SIZE = 4096
# Prefill chunks are lowered at these token counts and interpolated linearly between them (FLOPs and
# bytes are linear in tokens except the attention's quadratic term and the experts touched, both
# smooth): powers of two up to 512, then every 512 tokens up to 16,384; longer chunks are lowered as is.
_BUCKETS = [2**i for i in range(10)] + list(range(1024, 16385, 512))


def _token_buckets(tokens: int) -> tuple[int, int]:
    """The grid points around `tokens` (equal when it is on the grid or beyond it)."""
    if tokens >= _BUCKETS[-1] or tokens in _BUCKETS:
        return tokens, tokens
    i = bisect.bisect_right(_BUCKETS, tokens)
    return _BUCKETS[i - 1], _BUCKETS[i]


def _achieved_rate(system: SystemSpec, fmt: str) -> float:
    """Best-shape achieved matmul FLOP/s for a compute format (MAMF), from the catalog where measured."""
    chip = system.chip
    peak = chip.flops(fmt)
    got = chip.extra.get(f"matmul_achieved_{fmt}_flops")
    if got is not None:
        return float(got)
    ratios = [
        float(chip.extra[f"matmul_achieved_{f}_flops"]) / float(chip.peak_flops[f])
        for f in ("fp8", "bf16")
        if f"matmul_achieved_{f}_flops" in chip.extra and f in chip.peak_flops
    ]
    return peak * (ratios[0] if ratios else MAMF_DEFAULT)


def _ctx_bucket(mean: float) -> float:
    """Mean context rounded to 1/16 of an octave (about 4 %): attention time varies smoothly with it."""
    if mean < 16:
        return float(round(mean))
    return float(round(2.0 ** (round(math.log2(mean) * 16) / 16)))


def _mix(a: StepBreakdown, b: StepBreakdown, w: float) -> StepBreakdown:
    """Linear interpolation between two breakdowns (weight w on b)."""
    v = 1.0 - w
    return StepBreakdown(
        v * a.compute_s + w * b.compute_s, v * a.memory_s + w * b.memory_s, v * a.overhead_s + w * b.overhead_s,
        v * a.collective_s + w * b.collective_s, v * a.total_s + w * b.total_s, v * a.attn_s + w * b.attn_s,
        v * a.ffn_s + w * b.ffn_s,
    )


# The op graph of a step depends on the model, the step's shape and the formats, not on the layout: a
# layout search, a simulation and `lpxsim validate` price each shape under many layouts and batches. What
# pricing reads of a graph is its plan (~20 distinct ops and per-op class indices: ~80 kB for DeepSeek-R1),
# so the plan is kept, not the graph (~1,300 ops, ~0.8 MB): enough plans for every shape of a validation run
# (~1,000; at most ~170 MB), where 64 whole graphs made it lower 37 % of its shapes twice or more. A plan
# is made from one lowered layer of each kind (`plan_step`), not the whole graph.
_PLANS: OrderedDict[tuple, tuple[ModelSpec, GraphPlan]] = OrderedDict()
_PLANS_SIZE = 2048


def _lowered_plan(model: ModelSpec, kind: str, new_tokens: int, contexts: tuple[int, ...], weights: str, kv: str,
                  kv_layout: str) -> GraphPlan:
    key = (id(model), kind, new_tokens, contexts, weights, kv, kv_layout)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is model:  # the model object itself: an id is reused only after it dies
        _PLANS.move_to_end(key)
        return hit[1]
    plan = plan_step(model, Phase(kind, contexts, new_tokens), weights, kv, kv_layout)  # type: ignore[arg-type]
    _PLANS[key] = (model, plan)
    if len(_PLANS) > _PLANS_SIZE:
        _PLANS.popitem(last=False)
    return plan


_SPEC_DIGESTS: dict[int, tuple[object, str]] = {}


def _spec_digest(spec: ModelSpec | SystemSpec) -> str:
    """The cache digest of a spec, once per spec object (a cache-key part; walking the spec field by
    field for every layout of a search cost more than pricing its steps)."""
    hit = _SPEC_DIGESTS.get(id(spec))
    if hit is None or hit[0] is not spec:
        hit = (spec, _fast_digest(spec))
        _SPEC_DIGESTS[id(spec)] = hit
    return hit[1]


def _fast_digest(spec: ModelSpec | SystemSpec) -> str:
    """SHA-256 of a spec's full text: pydantic's JSON, or a frozen dataclass's repr (every field, nested
    ones too), either far cheaper than `lpxsim.core.cache.digest`'s field-by-field walk. A repr naming an
    object by address would differ per process: then the walk."""
    import hashlib

    from lpxsim.core.cache import digest

    text = spec.model_dump_json() if hasattr(spec, "model_dump_json") else repr(spec)
    if " at 0x" in text:
        return digest(spec)
    return hashlib.sha256(f"{type(spec).__name__}:{text}".encode()).hexdigest()


_PARAMS_DIGESTS: dict[int, tuple[object, str]] = {}


def _params_digest(params: GpuParams) -> str:
    """The cache digest of a GpuParams, once per object (every layout of a search shares one)."""
    from lpxsim.core.cache import digest

    hit = _PARAMS_DIGESTS.get(id(params))
    if hit is None or hit[0] is not params:
        hit = (params, digest(params))
        _PARAMS_DIGESTS[id(params)] = hit
    return hit[1]


def _step_book_key(model: ModelSpec, system: SystemSpec) -> str:
    """The step-cache entry holding the priced steps of `model` on `system` (every layout, format and
    framework); its version hashes the GPU cost model's and the graph's source."""
    from lpxsim.core.cache import digest, source_version

    return digest("gpu-step-book", source_version("lpxsim.gpu", "lpxsim.graph"), _spec_digest(model),
                  _spec_digest(system))


def _op_source(system: SystemSpec, framework: str, project_from: str | None):
    """(measured-ops lookup, sibling SystemSpec or None, label) for `system`; None when nothing measured."""
    from lpxsim.gpu.projection import sibling

    if project_from is None and system.name in AIC_SYSTEM:
        ops = measured_ops(AIC_SYSTEM[system.name], framework)
        return ops, None, f"measured: aiconfigurator-core {aic_version()} {AIC_SYSTEM[system.name]}/{framework}"
    sib = sibling(system, project_from)
    if sib is None:
        return None
    from lpxsim.gpu.amd_kernels import has_tables, tables_digest

    ops = measured_ops(AIC_SYSTEM[sib.name], framework)
    own = (f"; where AMD's own tuning tables have rows (aiter: FP8 block-scale GEMMs, fused MoE; hipBLASLt: "
           f"per-tensor FP8 GEMMs) they time the op ({tables_digest()})" if has_tables(system) else "")
    return ops, sib, (f"projected (grade E) from {sib.name} measured by aiconfigurator-core {aic_version()} "
                      f"({AIC_SYSTEM[sib.name]}/{framework}) by achieved rates{own}")


class GpuStepModel:
    """Cost of decode steps, prefill chunks and verification on GPUs, from the op graph."""

    def __init__(
        self,
        model: str | ModelSpec,
        system: str | SystemSpec = "h200-hgx",
        gpus: int | None = None,
        tp: int | None = None,
        ep: int = 1,
        pp: int = 1,
        dp_attention: bool = False,
        kv_parallel: bool = False,
        weights: str = "fp8",
        kv: str = "bf16",
        dense_weights: str | None = None,
        cuda_graphs: bool = True,
        mem_fraction: float = 0.9,
        kv_layout: str = "separate",
        expert_skew: float = 0.0,
        prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
        max_batch: int | None = None,
        params: GpuParams | None = None,
        framework: str = "sglang",
        part: str = "all",
        project_from: str | None = None,
        measured: bool = True,
        moe_backend: str | None = None,
        graph_batches: tuple[int, ...] | None = None,
        release: str | None = LATEST,
    ) -> None:
        from lpxsim.catalog import get_model, get_system

        self.model = get_model(model)
        self.system = get_system(system) if isinstance(system, str) else system
        if self.system.chip.kind != "gpu":
            raise UserError("system", f"{self.system.name} is not a GPU system")
        if not 0.0 < mem_fraction <= 1.0:
            raise UserError("mem_fraction", f"expected a fraction in (0, 1], got {mem_fraction}")
        if not 0.0 <= expert_skew < 1.0:
            raise UserError("expert_skew", f"expected a value in [0, 1), got {expert_skew}")
        if tp is None and gpus is None:  # one HGX node, or 8 GPUs of an NVL72 rack
            tp = min(8, self.system.topology.chips_per_node)
        self.layout = Layout.make(self.model, gpus, tp, ep, pp, dp_attention, kv_parallel)
        limit = self.system.max_units * self.system.chips_per_unit
        if self.layout.gpus > limit:
            raise UserError("gpus", f"{self.layout.gpus} GPUs exceed {self.system.name}'s {limit}")
        self.weights = get_precision(weights, "weights").name
        self.kv = get_precision(kv, "kv").name
        self.formats = checkpoint_formats(self.model, self.weights, dense_weights)
        self.dense_weights = self.formats.dense
        self.kv_layout, self.cuda_graphs, self.expert_skew = kv_layout, cuda_graphs, expert_skew
        # a replica's running sequences: the given cap, else the default for each of its schedulers (an attention-DP
        # rank schedules its own batch: a dep32 decode worker runs 32 of them)
        self.prefill_chunk = prefill_chunk
        self._max_batch = DEFAULT_MAX_BATCH * self.layout.attention_ranks if max_batch is None else max_batch
        # the decode batch whose fp32 logits each GPU reserves: one scheduler's default cap, else the cap as given
        # (a stated attention-DP cap is counted whole on every GPU, as before: see docs/validation.md, "Disaggregated
        # rows", for why the rank's share was not adopted)
        self.logits_batch = DEFAULT_MAX_BATCH if max_batch is None else max_batch
        self.params = params or fitted_params()
        self.framework = framework_name(framework)
        # the engine release whose host time a step carries: the latest (an answer), a run's date (a replay)
        self.engine = engine_params(self.framework, release)
        if graph_batches is not None:  # the decode CUDA-graph capture sizes a launch states (else the engine's own)
            if not graph_batches or any(not isinstance(b, int) or b < 1 for b in graph_batches):
                raise UserError("graph_batches", f"expected positive whole batch sizes, got {graph_batches!r}")
            self.engine = replace(self.engine, graph_batches=tuple(sorted(set(graph_batches))))
        # the MoE kernels the engine runs (measured.MOE_BACKEND_OF); by default what InferenceX launches
        if moe_backend is not None and moe_backend not in MOE_BACKENDS:
            raise UserError("moe_backend", f"expected one of {', '.join(sorted(MOE_BACKENDS))}, got {moe_backend!r}")
        self.moe_backend = moe_backend or launch_moe_backend(self.framework, self.weights, self.layout.dp_attention)
        if part not in ("all", "attention"):
            raise UserError("part", f"expected 'all' or 'attention', got {part!r}")
        self.part = part
        self.source = _op_source(self.system, self.framework, project_from) if measured else None
        self.bw_Bps = float(self.system.chip.memory_bw_Bps)
        self.fabric = fabric_for(self.system, self.layout.tp, cuda_graphs)
        self.rates = {
            self.weights: _achieved_rate(self.system, get_precision(self.weights).compute),
            "dense": _achieved_rate(self.system, get_precision(self.dense_weights).compute),
            "attention": _achieved_rate(self.system, get_precision(self.kv).compute),
        }
        self._dense_scale = (get_precision(self.dense_weights).bytes_per_element
                             / get_precision(self.weights).bytes_per_element)
        self.memory = self._budget(mem_fraction)
        self._features: OrderedDict[tuple, StepFeatures] = OrderedDict()
        self._priced: dict[tuple, tuple[StepBreakdown, dict[str, float]]] = {}
        self._cache_base: str | None = None
        self._book_key: str | None = None
        self._prefill_kernels: float | None = None  # kernels of one prefill pass (prefill_dispatch_s)
        self.cost_sources: dict[str, str] = {}  # op family -> where its times came from (filled as priced)

    def _budget(self, mem_fraction: float) -> memory.MemoryBudget:
        """The HBM budget of the busiest GPU; DoesNotFit if the weights leave no room for KV."""
        b = memory.budget(self.model, self.layout, float(self.system.chip.memory_bytes), self.weights,
                          mem_fraction, self.prefill_chunk, self.logits_batch, self.dense_weights, self.formats.native)
        if not b.fits:
            raise DoesNotFit(
                "gpus",
                f"{self.model.name} at {self.weights} needs {b.weight_bytes / 1e9:,.1f} GB of weights "
                f"+ {b.activation_bytes / 1e9:,.1f} GB activations per GPU with {self.layout.label()}; "
                f"a {self.system.chip.name} has {b.hbm_bytes / 1e9:,.1f} GB; use more GPUs or a smaller format",
            )
        return b

    @property
    def decode_batch_breaks(self) -> tuple[int, ...]:
        """The replica's batch sizes after which a decode step costs a jump more: the largest batch each captured
        CUDA graph runs (one sequence more replays the next captured graph, padded: `_breakdown`), counted over
        the replica's attention ranks. Empty where steps are not padded (no graphs, or the roofline model)."""
        if not self.cuda_graphs or self.source is None:
            return ()
        return tuple(g * self.layout.replicas for g in self.engine.graph_batches)

    @property
    def admission_hold(self) -> tuple[int, int, int] | None:
        """(attention-DP ranks per replica, timeout in engine steps, replicas) when the engine holds a new
        prefill until every attention-DP rank has one (TensorRT-LLM's attention-DP balance), else None.
        `steady_state` adds the hold to TTFT (`admission_hold_steps`)."""
        t = self.engine.adp_balance_timeout_iters
        if not self.layout.dp_attention or self.layout.tp <= 1 or t <= 0:
            return None
        return (self.layout.tp, t, self.layout.replicas)

    @property
    def admission_poll(self) -> tuple[int, int, int] | None:
        """(concurrency threshold, poll interval below it, at or above it) in decode steps when the engine
        reads new requests only every few decode steps (SGLang's --scheduler-recv-interval as InferenceX
        launches it on Blackwell), else None. `engine.steady_state.poll_wait_steps` turns it into the mean wait."""
        r = self.engine.recv_interval
        if r is None or self.system.chip.name.upper() not in r[0]:
            return None
        return (r[1], r[2], r[3])

    @property
    def prefill_alone(self) -> bool:
        """Whether the engine runs a prefill batch as its own forward pass, its first token out when the prefill
        ends (SGLang), rather than in an iteration that also carries the running decodes (`EngineParams`)."""
        return self.engine.prefill_alone

    @property
    def prefill_pass_tokens(self) -> int | None:
        """Prompt tokens one prefill pass of the engine packs on this GPU (`EngineParams.prefill_pass`: SGLang's
        --chunked-prefill-size as InferenceX launches it), else None (the steady state's chunk).
        `engine.steady_state.co_admitted_later` caps the prompts that share a polled pass by it, and
        `engine.benchmark_run` packs a benchmark's start-up burst into passes of it."""
        chip = self.system.chip.name.upper()
        for gpus, weights, tp, tokens in self.engine.prefill_pass:
            if chip in gpus and weights == self.weights and tp == self.layout.tp:
                return tokens
        return None

    @property
    def spec_round_overhead_s(self) -> float:
        """Host seconds an MTP round spends beyond its verify step (`step.speculative.mtp_round_s`): the
        engine's per-step time for each extra pass it launches (`EngineParams.spec_extra_passes`), 0 where the
        engine overlaps that host work with the GPU (`EngineParams.spec_overlap`: SGLang's spec v2)."""
        if self.source is None or self.engine.spec_overlap:
            return 0.0
        return self.engine.spec_extra_passes * self.engine.step_overhead_s

    # --- the StepModel seam -------------------------------------------------------------

    @property
    def engine_release(self) -> str:
        """The engine release whose fitted host time the steps carry (a month "YYYY-MM", or "pooled")."""
        return self.engine.release

    @property
    def name(self) -> str:
        fmt = self.weights if self.dense_weights == self.weights else f"{self.weights}/{self.dense_weights}"
        return f"{self.system.name} {self.layout.label()} {fmt}"

    @property
    def chips(self) -> int:
        return self.layout.gpus

    @property
    def power_w(self) -> float:
        """This replica group's share of its nodes'/racks' power (per-GPU share of the unit)."""
        return float(self.system.power_w) / self.system.chips_per_unit * self.chips

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        b = self.decode_breakdown(batch)
        return self._pipelined(self._part_s(b))

    def stage_share(self) -> float:
        """The share of a pass one pipeline stage runs: its layers over the model's (1 without pipeline
        parallelism; the first stages hold ceil(L / pp) layers, so the busiest sets the pace)."""
        pp = self.layout.pp
        if pp <= 1:
            return 1.0
        layers = self.model.num_layers
        return min(1.0, -(-layers // pp) / layers)

    def _pipelined(self, seconds: float) -> StepCost:
        """A pass through every stage: its latency is the whole pass, and the next micro-batch may enter when
        the busiest stage frees (its layers' share of the GPU time). The engine's host work per step is not
        shared out: each micro-batch is scheduled on its own."""
        share = self.stage_share()
        if share >= 1.0:
            return StepCost.serial(seconds)
        host = self.engine.step_overhead_s if self.source is not None else 0.0
        return StepCost(seconds, min(seconds, host + (seconds - host) * share))

    def _part_s(self, b: StepBreakdown) -> float:
        """The seconds this model answers for: the whole step, or (part="attention") the attention half
        plus the engine's per-step host work (the GPU side of attention/FFN disaggregation)."""
        if self.part == "attention":
            return b.attn_s + (self.engine.step_overhead_s if self.source is not None else 0.0)
        return b.total_s

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        """A prefill chunk (no CUDA graphs: engines capture graphs for decode only).

        With attention data-parallelism the engine prefills one sequence per attention rank in
        one forward pass, so a lone sequence is priced inside a pass of tp sequences and holds
        the replica for its 1/tp share of that pass. The latency is at least the pass's host
        dispatch (`prefill_dispatch_s`) and includes the engine's first-token host time; the
        interval (GPU occupancy) includes neither.
        """
        t, occupancy = self._prefill(chunk)
        first = self.engine.first_token_overhead_s if self.source is not None else self.params.first_token_overhead_s
        s = self._part_s(t)
        # the pass lasts at least its host dispatch (a short prompt's eager pass is host-bound), and the
        # first token also waits for host work (tokenizing, scheduling, streaming it back): latency. The
        # occupancy other users see stays the GPU's (assumption "eager-prefill-occupancy": where their
        # prefills matter, prompts share passes and so share the pass's dispatch)
        return StepCost(max(s, self.prefill_dispatch_s()) + first, s * occupancy * self.stage_share())

    def prefill_dispatch_s(self) -> float:
        """Host seconds to issue one prefill pass: its kernels x the per-kernel eager dispatch time
        (`GpuParams.eager_dispatch_s`, fitted). Engines capture CUDA graphs for decode only, so a prefill
        pass is issued op by op from Python; the host runs ahead of the GPU, and the pass ends no sooner
        than the host has issued its last kernel (a short prompt's pass is host-bound: `prefill` takes the
        longer of the two). 0 for an engine that graphs its prefill (`EngineParams.eager_prefill`).
        Kernels do not depend on the pass's tokens: counted once per model."""
        if not self.engine.eager_prefill:
            return 0.0
        k = getattr(self, "_prefill_kernels", None)  # a step unpickled from an older cache lacks it
        if k is None:
            f = self._get("prefill", 1, (0,))
            k = float(f.kernels[f.is_attn_half].sum() if self.part == "attention" else f.kernels.sum())
            self._prefill_kernels = k
        return k * self.params.eager_dispatch_s

    def _prefill(self, chunk: PrefillChunk) -> tuple[StepBreakdown, float]:
        """(breakdown of the replica's pass, share of all replicas' time it occupies)."""
        if chunk.tokens <= 0 or chunk.sequences <= 0 or chunk.context < 0:
            raise UserError("chunk", "a prefill chunk needs tokens >= 1, sequences >= 1 and context >= 0")
        per = math.ceil(chunk.sequences / self.layout.replicas)
        busy = math.ceil(chunk.sequences / per)
        share = 1.0
        if self.layout.dp_attention and per < self.layout.tp:
            share, per = per / self.layout.tp, self.layout.tp
        lo, hi = _token_buckets(chunk.tokens)
        ctx = (chunk.context,) * per
        b_lo = self._breakdown("prefill", lo, ctx, graphs=False)
        if hi == lo:
            return b_lo, share * busy / self.layout.replicas
        b_hi = self._breakdown("prefill", hi, ctx, graphs=False)
        return _mix(b_lo, b_hi, (chunk.tokens - lo) / (hi - lo)), share * busy / self.layout.replicas

    def verify(self, batch: DecodeBatch, k: int) -> StepCost:
        if k < 0:
            raise UserError("k", f"expected k >= 0 draft tokens, got {k}")
        b = self._breakdown("verify", k + 1, self._replica_contexts(batch), self.cuda_graphs)
        return self._pipelined(self._part_s(b))

    def kv_capacity_bytes(self) -> float:
        return memory.replica_kv_capacity_bytes(self.memory, self.layout) * self.layout.replicas

    def kv_bytes(self, context: int) -> float:
        return kv_bytes_per_sequence(self.model, context, self.kv, self.kv_layout)

    def max_batch(self) -> int:
        return self._max_batch * self.layout.replicas

    # --- attention/FFN disaggregation hooks ---------------------------------------------

    @property
    def num_layers(self) -> int:
        return self.model.num_layers

    @property
    def activation_bytes_per_token(self) -> float:
        """Hidden-state bytes one token carries between the attention and FFN halves of a layer."""
        return self.model.hidden_size * 2.0

    def attention_step(self, batch: DecodeBatch) -> StepCost:
        """The attention half of all layers (incl. its collectives) of one decode step."""
        return StepCost.serial(self.decode_breakdown(batch).attn_s)

    def attention_prefill(self, chunk: PrefillChunk) -> StepCost:
        """The attention half of all layers for a prefill chunk."""
        b, _ = self._prefill(chunk)
        return StepCost.serial(b.attn_s)

    def ffn_step(self, tokens: int) -> StepCost:
        """The FFN/MoE half of all layers, the head and the step overhead, for `tokens` tokens."""
        return StepCost.serial(self.decode_breakdown(DecodeBatch.uniform(tokens, 1)).ffn_s)

    # --- detail -------------------------------------------------------------------------

    def decode_breakdown(self, batch: DecodeBatch) -> StepBreakdown:
        """Where the seconds of one decode step go (busiest GPU)."""
        return self._breakdown("decode", 1, self._replica_contexts(batch), self.cuda_graphs)

    def _breakdown(self, kind: str, new_tokens: int, contexts: tuple[int, ...], graphs: bool) -> StepBreakdown:
        """A step priced from measured op times (memoised by batch and bucketed mean context), or by
        the roofline cost model where no measured source covers this GPU."""
        if self.source is None:
            return price(self._get(kind, new_tokens, contexts), self.params, self.bw_Bps, graphs)
        n = len(contexts)
        if graphs and kind != "prefill":
            n = self.engine.graph_batch(n)  # the captured CUDA graph the engine replays
        # the padding rows of a captured graph are dummy requests of about one token (SGLang fills their sequence
        # lengths with its backend's fill value, TensorRT-LLM points them all at one dummy request: CUDA-PAD):
        # their GEMMs run, their attention reads almost no KV, so the padded batch's mean context counts them at 0
        ctx = _ctx_bucket(sum(contexts) / n)
        key = (kind, new_tokens, n, ctx, graphs)
        hit = self._priced.get(key)
        if hit is None:
            hit = self._persisted_price(kind, new_tokens, n, ctx, graphs)
            self._priced[key] = hit
        b, so = hit[0], self.engine.step_overhead_s
        return StepBreakdown(b.compute_s, b.memory_s, b.overhead_s + so, b.collective_s, b.total_s + so, b.attn_s,
                             b.ffn_s + so)

    def _persisted_price(self, kind: str, new_tokens: int, n: int, ctx: float,
                         graphs: bool) -> tuple[StepBreakdown, dict[str, float]]:
        """price_measured through lpxsim's step cache (a warm process lowers no graph, reads no table):
        one book per model and system holds every layout's priced steps (gpu/book.py)."""
        import hashlib

        from lpxsim.gpu.book import book
        from lpxsim.gpu.compose import price_measured

        if self._cache_base is None:  # plain values (the specs and parameters as their digests): repr is exact
            parts = (_spec_digest(self.model), _spec_digest(self.system), self.layout, self.weights,
                     self.dense_weights, self.kv, self.kv_layout, self.framework, _params_digest(self.params),
                     self.expert_skew, self.source[2], self.prefill_chunk, self._max_batch, self.moe_backend)
            self._cache_base = hashlib.sha256(repr(parts).encode()).hexdigest()

        def compute() -> dict:
            # the ops no table covers (an attention shape outside the measured heads, sliding-window layers, KV
            # writes) keep the roofline cost at this step's context, not at context 0
            f = self._get(kind, new_tokens, (round(ctx),) * n)
            b, secs = price_measured(self, f, kind, new_tokens, ctx, graphs)
            return {"b": [b.compute_s, b.memory_s, b.overhead_s, b.collective_s, b.total_s, b.attn_s, b.ffn_s],
                    "s": secs, "src": dict(self.cost_sources)}

        if self._book_key is None:
            self._book_key = _step_book_key(self.model, self.system)
        v = book(self._book_key).get_or_compute(
            f"{self._cache_base}|{kind}|{new_tokens}|{n}|{ctx!r}|{graphs}", compute, valid=_is_priced_step)
        for fam, label in v["src"].items():
            self.cost_sources.setdefault(fam, label)
        return StepBreakdown(*v["b"]), v["s"]

    def decode_roofline_s(self, batch: DecodeBatch) -> float:
        """Pure HBM roofline of a decode step on the busiest GPU: bytes / spec bandwidth."""
        return roofline_s(self._get("decode", 1, self._replica_contexts(batch)), self.bw_Bps)

    def _replica_contexts(self, batch: DecodeBatch) -> tuple[int, ...]:
        if batch.size <= 0:
            raise UserError("batch", "a decode step needs at least one sequence")
        return tuple(batch.contexts[:: self.layout.replicas])

    def _get(self, kind: str, new_tokens: int, contexts: tuple[int, ...]) -> StepFeatures:
        """Features of a step; decode/verify steps reuse one lowering per batch size (see with_contexts)."""
        key = (kind, new_tokens, contexts)
        f = self._features.get(key)
        if f is None:
            if kind.endswith("@0"):
                f = self._lowered(kind, new_tokens, contexts)
            else:
                base = self._get(kind + "@0", new_tokens, (0,) * len(contexts))
                f = with_contexts(base, contexts, new_tokens)
            self._features[key] = f
            if len(self._features) > _CACHE_SIZE:
                self._features.popitem(last=False)
        else:
            self._features.move_to_end(key)
        return f

    def _lowered(self, kind: str, new_tokens: int, contexts: tuple[int, ...]) -> StepFeatures:
        plan = _lowered_plan(self.model, kind.removesuffix("@0"), new_tokens, contexts, self.weights, self.kv,
                             self.kv_layout)
        # DeepSeek-style (MLA) FP8 checkpoints are block-scaled: their GEMMs run the block-FP8 kernels
        table_fmt = "fp8_block" if (self.model.is_mla and self.dense_weights == "fp8") else self.dense_weights
        # an engine that dequantises the block-FP8 kv_b weights at load runs MLA's absorbed BMMs in BF16
        bf16_absorb = self.system.vendor in self.engine.bf16_absorb_vendors
        absorb = "bf16" if (table_fmt == "fp8_block" and bf16_absorb) else None
        return build(plan, self.layout, self.rates, self.fabric, self.expert_skew, self._dense_scale, table_fmt,
                     self.formats.native, absorb)


def _is_priced_step(v: object) -> bool:
    """A stored priced step: {"b": 7 numbers, "s": seconds by label, "src": labels} (else recomputed)."""
    return (isinstance(v, dict) and isinstance(v.get("b"), list) and len(v["b"]) == 7
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v["b"])
            and isinstance(v.get("s"), dict) and isinstance(v.get("src"), dict))
