"""Artificial Analysis' output-speed methodology, simulated.

AA sends requests one after another (concurrency 1) with a stated input context
and measures, per request, output speed = tokens received after the first chunk
/ time from the first chunk to the last, counting tokens with o200k_base. The
published figure is the median over requests.

Here each request is timed on a backend: its prefill (in chunks, pipelined as the
backend's StepCost says), then one decode step per token at batch 1 and the
growing context. Requests differ in one real way: how long the answer is. Output
lengths are drawn from a seeded log-normal around AA's 500-token convention
(AA normalises end-to-end time to 500 output tokens and does not publish per-request
lengths; docs/assumptions.md). A longer answer decodes at longer contexts and
amortises the first chunk differently, so speeds differ a little, as in the real
benchmark; no noise is added for its own sake.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from lpxsim.bench.backends import hardware_label
from lpxsim.bench.published import Published, lookup
from lpxsim.bench.stats import pct_diff, summarize
from lpxsim.bench.tokens import TokenConversion
from lpxsim.catalog import get_model, get_system
from lpxsim.core.errors import UserError
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepModel

DEFAULT_CONTEXTS = (10_000, 100_000)
DECODE_STRIDE = 64  # contexts between exact decode evaluations; linear in between (KV reads grow linearly)


@dataclass(frozen=True)
class AASetup:
    """How the simulated AA run is set up. Contexts and output lengths are o200k tokens, as AA states them."""

    contexts: tuple[int, ...] = DEFAULT_CONTEXTS
    requests: int = 16
    output_median: int = 500
    output_sigma: float = 0.5  # log-normal shape of answer lengths
    output_min: int = 64
    output_max: int = 4096
    seed: int = 0
    conversion: TokenConversion = field(default_factory=TokenConversion)
    prefill_chunk: int = 8192  # tokens per prefill chunk (vLLM's default batch budget)
    chunk_tokens: int = 1  # tokens per streamed chunk: servers stream every token as it is sampled
    decode_stride: int = DECODE_STRIDE  # contexts between exact decode evaluations (1: every context)

    def __post_init__(self) -> None:
        if not self.contexts or any(c <= 0 for c in self.contexts):
            raise UserError("contexts", f"expected positive token counts, got {self.contexts}")
        if self.requests < 1:
            raise UserError("requests", f"expected at least 1, got {self.requests}")
        if not 1 <= self.output_min <= self.output_median <= self.output_max:
            raise UserError("output", "expected output_min <= output_median <= output_max, all >= 1")

    def output_lengths(self) -> np.ndarray:
        """Per-request answer lengths (o200k tokens), the same for every context and system."""
        rng = np.random.default_rng(self.seed)
        draws = rng.lognormal(math.log(self.output_median), self.output_sigma, self.requests)
        return np.clip(np.rint(draws), self.output_min, self.output_max).astype(int)


class DecodeLatency:
    """Batch-1 decode latency vs context, memoised on a grid of `stride` tokens and linear in between.

    Every request re-uses the grid points it shares with the others. A decode step's cost is affine in the
    context over a stride (one more token of KV to read per token), so the interpolation is exact for an
    affine backend and, for the rest, a test bounds its error; `stride=1` evaluates every context.
    """

    def __init__(self, step: StepModel, stride: int = DECODE_STRIDE) -> None:
        self._step = step
        self._stride = max(1, int(stride))
        self._cache: dict[int, float] = {}

    def _exact(self, context: int) -> float:
        v = self._cache.get(context)
        if v is None:
            v = self._step.decode_step(DecodeBatch((context,))).latency_s
            self._cache[context] = v
        return v

    def __call__(self, context: int) -> float:
        lo = context - context % self._stride
        if lo == context:
            return self._exact(context)
        hi = lo + self._stride
        f = (context - lo) / self._stride
        return self._exact(lo) + f * (self._exact(hi) - self._exact(lo))


@dataclass(frozen=True)
class RequestTiming:
    """One request at concurrency 1, native tokens; times from the moment it was sent."""

    input_tokens: int
    output_tokens: int
    ttft_s: float
    last_token_s: float
    first_chunk_tokens: int


def time_request(
    step: StepModel, isl: int, osl: int, decode: DecodeLatency, prefill_chunk: int, chunk_tokens: int = 1
) -> RequestTiming:
    """Time one request alone on `step`: chunked prefill, then one batch-1 decode step per token."""
    done, start, ttft = 0, 0.0, 0.0
    while done < isl:  # chunk i may enter one initiation interval after chunk i-1 entered
        n = min(prefill_chunk, isl - done)
        cost = step.prefill(PrefillChunk(tokens=n, context=done))
        ttft = start + cost.latency_s
        start += cost.interval_s
        done += n
    t = ttft  # the first token is sampled from the last prefill position
    for i in range(1, osl):  # token i+1 needs token i: latency, not interval, at batch 1
        t += decode(isl + i)
    return RequestTiming(isl, osl, ttft, t, min(chunk_tokens, osl))


def aa_output_speed(t: RequestTiming, conv: TokenConversion) -> float:
    """AA's output speed of one request in o200k tokens/s (NaN for a one-chunk answer)."""
    after_first = t.output_tokens - t.first_chunk_tokens
    span = t.last_token_s - t.ttft_s
    if after_first <= 0 or span <= 0:
        return math.nan
    return conv.to_o200k(after_first) / span


@dataclass(frozen=True)
class AAPoint:
    """The AA result at one context on one system. Per-user speed with its context, concurrency, hardware."""

    model: str
    system: str
    hardware: str
    chips: int
    power_w: float
    context: int  # o200k tokens, as AA states it
    native_context: int
    concurrency: int
    requests: int
    output_speed: dict[str, float]  # o200k tok/s: median, p5, p25, p75, p95, mean, n
    ttft_s: dict[str, float]
    output_tokens_median: float
    published: Published | None
    diff_pct: float | None  # simulated median vs published, percent
    # streams of this context (input and median output) the deployment holds at once, as the engine counts them
    # (`engine.answer.kv_ceiling`, every replica): the one user's speed is never given without it
    capacity_streams: int | None = None
    # the error band of the deployment's cost path around the median speed and TTFT (`engine.bands.figure_bands`:
    # cost_path, band, tok_s_user_low/high, ttft_low/high, ...); {} where none is known (a fleet)
    bands: dict = field(default_factory=dict)

    def row(self) -> dict:
        """Flat table row (for DataFrames, parquet and the report)."""
        return {
            "model": self.model, "system": self.system, "hardware": self.hardware, "chips": self.chips,
            "power_kw": self.power_w / 1e3, "context": self.context, "native_context": self.native_context,
            "concurrency": self.concurrency, "requests": self.requests,
            **{f"speed_{k}": v for k, v in self.output_speed.items() if k != "n"},
            **{f"ttft_{k}_s": v for k, v in self.ttft_s.items() if k not in ("n", "mean")},
            "output_tokens_median": self.output_tokens_median,
            "published_id": self.published.id if self.published else None,
            "published": self.published.value if self.published else None,
            "diff_pct": self.diff_pct, "capacity_streams": self.capacity_streams, **self.bands,
        }


def run_aa_on_step(step: StepModel, model: str, system: str, setup: AASetup) -> tuple[list[AAPoint], pd.DataFrame]:
    """Run the AA benchmark on one StepModel: one point per context, plus the per-request table."""
    conv = setup.conversion
    out_native = [conv.to_native(int(n)) for n in setup.output_lengths()]
    decode = DecodeLatency(step, setup.decode_stride)
    points, rows = [], []
    for ctx in setup.contexts:
        isl = conv.to_native(ctx)
        timings = [time_request(step, isl, osl, decode, setup.prefill_chunk, setup.chunk_tokens) for osl in out_native]
        speeds = [aa_output_speed(t, conv) for t in timings]
        for i, (t, s) in enumerate(zip(timings, speeds, strict=True)):
            rows.append({"model": model, "system": system, "context": ctx, "request": i,
                         "native_input_tokens": t.input_tokens, "native_output_tokens": t.output_tokens,
                         "ttft_s": t.ttft_s, "e2e_s": t.last_token_s, "output_speed": s})
        points.append(_point(step, model, system, ctx, isl, timings, speeds, setup))
    return points, pd.DataFrame(rows)


def _point(step, model, system, ctx, isl, timings, speeds, setup) -> AAPoint:
    valid = [s for s in speeds if math.isfinite(s)]
    if not valid:
        raise UserError("output-median", "every answer came in one chunk, so none has an output speed (AA's speed "
                                         "is over the tokens after the first chunk); ask for longer answers")
    speed = summarize(valid)
    pub = lookup(model, system, "aa_output_speed_median", ctx)
    return AAPoint(
        model=model, system=system, hardware=hardware_label(step), chips=step.chips, power_w=step.power_w,
        context=ctx, native_context=isl, concurrency=1, requests=setup.requests, output_speed=speed,
        ttft_s=summarize([t.ttft_s for t in timings]),
        output_tokens_median=float(np.median([setup.conversion.to_o200k(t.output_tokens) for t in timings])),
        published=pub, diff_pct=pct_diff(speed["median"], pub.value) if pub else None,
    )


def run_aa(model: str, system: str, setup: AASetup | None = None, weights: str = "fp8",
           kv: str = "bf16", framework: str = "sglang") -> tuple[list[AAPoint], pd.DataFrame]:
    """AA benchmark of a catalog model on a catalog system (LPX or GPU, the latter under serving engine
    `framework`) or a fleet (mode name or YAML)."""
    from lpxsim.bench.fleets import is_fleet

    setup = setup or AASetup()
    model = get_model(model).name
    if is_fleet(system):
        from lpxsim.bench.aa_fleet import run_aa_on_fleet

        return run_aa_on_fleet(system, model, setup)
    spec = get_system(system)
    system = spec.name
    if not spec.is_lpu:
        from lpxsim.gpu.engine import framework_name

        framework = framework_name(framework)  # one-line error naming `framework`
    placed = aa_deployment(model, system, setup, weights, kv, framework)
    points, df = run_aa_on_step(placed.step, model, system, setup)
    dep = placed.deployment  # every point is labelled with the deployment it ran on, as every other answer
    from lpxsim.engine.answer import kv_ceiling

    def holds(p: AAPoint) -> int:
        out = setup.conversion.to_native(max(1, round(p.output_tokens_median)))
        return kv_ceiling(placed.step, p.native_context + out) * dep.replicas

    from lpxsim.engine.bands import figure_bands, path_for

    path = path_for(system, weights, framework)

    def bands(p: AAPoint) -> dict:  # one user's speed is a tok/s/user answer: its path's band goes with it
        return figure_bands(system, path, dep.layout, {"tok_s_user": p.output_speed["median"],
                                                       "ttft": p.ttft_s["median"]})

    return [replace(p, hardware=dep.label(), chips=dep.powered_chips, power_w=dep.power_w, capacity_streams=holds(p),
                    bands=bands(p)) for p in points], df


def aa_deployment(model: str, system: str, setup: AASetup, weights: str = "fp8", kv: str = "bf16",
                  framework: str = "sglang"):
    """The deployment AA runs on: the engine's default deployment (`engine.deployment.place`) for the longest
    context AA asks about and the default output length -- the one endpoint that serves every AA context, and
    the deployment `estimate` and `sweep` answer on at that context (one replica of it serves the one user)."""
    from lpxsim.engine.deployment import Precision, place
    from lpxsim.engine.query import DEFAULT_OSL, Workload

    isl = setup.conversion.to_native(max(setup.contexts))
    try:
        return place(model, system, Workload(isl, DEFAULT_OSL), None, Precision(weights, kv), framework=framework)
    except ImportError as e:
        from lpxsim.bench.backends import BackendUnavailable

        raise BackendUnavailable("system", f"the backend for {system} is not available in this build: {e}") from None
