"""A finite saturated run, as MLPerf's Offline scenario runs it: a fixed number of samples, all queued at once.

LoadGen issues the whole query at the start (`samples_per_query` samples, drawn from the dataset as
concatenated random permutations), the harness spreads it over the replicas, and each replica's engine admits
sequences first come, first served while it has room. The run ends when its last sample does, and the
result is its output tokens over that time. Two things set it apart from the endless queue of
`engine.offline.offline_throughput`:

- the batch is full only while samples wait: once the queue is empty it drains, the longest outputs finishing
  last at ever smaller batches, where a step yields fewer tokens per second;
- the running sequences are not a steady mix at the start: the first wave is admitted together.

The replica is stepped event by event (`offline_run`): between two completions every running sequence gains
one token a step; a step costs the decode period of the running batch at its mean context (linear in the
context, priced at two contexts per batch size), and each admitted prompt its share of packed prefill, as in
the steady state. With many samples a replica the result tends to the steady state.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from lpxsim.core.errors import UserError
from lpxsim.engine.lengths import LengthMix
from lpxsim.engine.offline import OfflinePoint, offline_throughput
from lpxsim.engine.steady_state import decode_period
from lpxsim.step.protocol import StepModel

BATCH_GRID = 16  # batch sizes the decode period is priced at (log-spaced); 12 to 48 agree within 0.5 % on the MLPerf runs


@dataclass(frozen=True)
class OfflineRun:
    """One replica's share of a finite Offline run, beside the steady state it tends to."""

    steady: OfflinePoint
    samples: int  # samples this replica runs
    slots: int  # the most sequences it runs at once
    makespan_s: float
    output_tokens: int
    output_tok_s: float
    output_tok_s_per_chip: float

    @property
    def run_factor(self) -> float:
        """The run's throughput over the steady state's (below 1: the start and the drain)."""
        return self.output_tok_s / self.steady.output_tok_s


def draw_order(mix: LengthMix, samples: int, seed: int = 0) -> np.ndarray:
    """Sample indices in LoadGen's order: random permutations of the dataset, concatenated, cut at `samples`."""
    rng = np.random.default_rng(seed)
    reps = math.ceil(samples / mix.samples)
    return np.concatenate([rng.permutation(mix.samples) for _ in range(reps)])[:samples]


def offline_run(step: StepModel, mix: LengthMix, samples: int, *, tokens_per_pass: int | None = None,
                iteration_tokens: int | None = None, concurrency: int | None = None,
                reserve_tokens: int | None = None, seed: int = 0) -> OfflineRun:
    """One replica running `samples` samples of `mix`, all queued at the start (see the module docstring);
    `reserve_tokens`: the KV a request reserves when admitted (`offline.saturated_batch`)."""
    if not isinstance(samples, int) or samples < 1:
        raise UserError("samples", f"expected a positive integer, got {samples!r}")
    isl, osl = max(1, round(mix.mean_isl)), max(1, round(mix.mean_osl))
    resident = mix.resident_context()
    steady = offline_throughput(step, isl, osl, tokens_per_pass=tokens_per_pass, iteration_tokens=iteration_tokens,
                                context=resident, concurrency=concurrency, reserve_tokens=reserve_tokens)
    slots = steady.batch
    base_s, slope_s_per_tok, grid = _period_table(step, slots, resident)
    # linear between the priced batch sizes, read once per batch size (a run has ~10^4 events)
    sizes = np.arange(slots + 1)
    base_at, slope_at = np.interp(sizes, grid, base_s).tolist(), np.interp(sizes, grid, slope_s_per_tok).tolist()
    prefill_s_per_tok = steady.prefill_s * osl / (steady.batch * isl)  # the steady state's, a prompt token

    order = draw_order(mix, samples, seed)
    lens, prompts = mix.osl[order], mix.isl[order]
    running: list[tuple[int, int, int]] = []  # (finishing step, prompt, starting step)
    clock_s, now, nxt = 0.0, 0, 0
    sum_prompt = sum_start = 0

    def admit() -> None:
        nonlocal nxt, clock_s, sum_prompt, sum_start
        while nxt < samples and len(running) < slots:
            p = int(prompts[nxt])
            heapq.heappush(running, (now + int(lens[nxt]), p, now))
            clock_s += p * prefill_s_per_tok  # its prompt, beside the running decodes
            sum_prompt += p
            sum_start += now
            nxt += 1

    admit()
    while running:
        b = len(running)
        steps = running[0][0] - now
        ctx = sum_prompt / b + now - sum_start / b + steps / 2.0  # the batch's mean context, mid-interval
        step_s = base_at[b] + slope_at[b] * ctx
        clock_s += steps * max(step_s, 0.0)
        now += steps
        while running and running[0][0] == now:
            _, p, s = heapq.heappop(running)
            sum_prompt -= p
            sum_start -= s
        admit()
    tokens = int(lens.sum())
    out = tokens / clock_s
    return OfflineRun(steady=steady, samples=samples, slots=slots, makespan_s=clock_s, output_tokens=tokens,
                      output_tok_s=out, output_tok_s_per_chip=out / max(1, step.chips))


def _period_table(step: StepModel, slots: int, context: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(period at zero context, period per context token, batch sizes): the decode period of each priced batch
    size, linear in the mean context (attention reads and computes over every cached token).

    A step padded to its captured CUDA graph costs the same GEMMs from one captured size to the next and jumps
    past each (`decode_batch_breaks`): both sides of every jump are priced, so the linear reading between two
    priced sizes never spans one."""
    grid = np.rint(np.geomspace(1, max(1, slots), BATCH_GRID)).astype(int)
    breaks = [b + d for b in (getattr(step, "decode_batch_breaks", None) or ()) for d in (0, 1) if b + d <= slots]
    grid = np.unique(np.concatenate([grid, np.asarray(breaks, dtype=int)]))
    c0, c1 = max(1, int(round(context))), max(2, int(round(2 * context)))
    p0 = np.array([decode_period(step, int(b), c0)[0] for b in grid])
    p1 = np.array([decode_period(step, int(b), c1)[0] for b in grid])
    slope = (p1 - p0) / (c1 - c0)
    return p0 - slope * c0, slope, grid
