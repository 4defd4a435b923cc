"""Prepare a fleet's LPX deployments before a run: compile every step shape a serving run can ask.

The LPX compiler emits its schedules before the workload starts; lpxsim compiles a step shape the first time
a run asks for it, so which programs a run compiles depends on its draws (a chunk's tail of 32 rows, three
sequences prefilling together), and a cold run spends most of its time compiling. `prepare_shapes` asks
each LPX pool's step model the whole shape space up front: prefill chunks of 1..`max_sequences` sequences at
every power-of-two sub-chunk size the backend compiles (1..`PREFILL_ROWS` rows), decode batches up to as
many streams as the KV holds (`decode_batches`), at a context inside every bracket of the context grid up to
`max_context`. The step cache keeps the programs' summaries, so a later process (or run) compiles none of them
again. GPU pools price shapes from their tables in microseconds and need no preparation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from lpxsim.catalog import get_system
from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.lpu.stepmodel import PREFILL_ROWS
from lpxsim.serving.backends import make_step_model
from lpxsim.serving.config import FleetConfig
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepModel

MAX_DECODE_BATCH = 1024  # the largest decode batch prepared (a replica that holds more compiles beyond it lazily)


def shape_contexts(max_context: int) -> list[int]:
    """Contexts that fall inside every bracket of the LPX context grid (its buckets are 0, 1K, 4K, 16K, ...;
    one context per 8K above 8K also lands in each of the sparse grids' brackets), and `max_context`."""
    return sorted({c for c in (0, 512, 1024, 2048, 4096, *range(8192, max_context, 8192)) if c < max_context}
                  | {max_context})


def decode_batches(step: StepModel, context: int, max_sequences: int, max_batch: int = MAX_DECODE_BATCH) -> list[int]:
    """Decode batches a run can price at `context`: 1..`max_sequences`, then every power of two up to as many
    streams as the replica's KV holds there (at most `max_batch`), and that many: the batch buckets the LPX
    step model compiles (a batch between two is interpolated from them)."""
    fit = min(int(step.kv_capacity_bytes() // max(step.kv_bytes(max(context, 1)), 1.0)), max_batch)
    powers = {1 << i for i in range(fit.bit_length())}  # every power of two <= fit (none when fit is 0)
    return sorted(set(range(1, max_sequences + 1)) | powers | ({fit} - {0}))


def prepare_shapes(fleet: FleetConfig, max_context: int | None = None, max_sequences: int = 8,
                   max_decode_batch: int = MAX_DECODE_BATCH,
                   on_shape: Callable[[int, int], None] | None = None) -> int:
    """Ask every LPX pool of `fleet` each step shape up to `max_context` tokens (default: each replica's target
    context, the one its layout was compiled for) and `max_sequences` sequences, compiling what the step cache
    lacks; returns the shapes asked. A shape the replica cannot hold is skipped (a run would be refused it too).
    `max_decode_batch` caps the decode batches (a workload known to run smaller batches needs fewer compiles).
    `on_shape(done, total)` reports progress."""
    if max_context is not None and max_context < 1:
        raise UserError("max_context", f"expected a positive number of tokens, got {max_context}")
    if max_sequences < 1:
        raise UserError("max_sequences", f"expected at least one sequence, got {max_sequences}")
    if max_decode_batch < 1:
        raise UserError("max_decode_batch", f"expected at least one sequence, got {max_decode_batch}")
    rows = [1 << i for i in range(PREFILL_ROWS.bit_length())]
    # the pools whose replica is one whole LPX model (an AFD FFN side compiles only its own part at run time)
    steps = [make_step_model(p) for p in fleet.pools if get_system(p.system).is_lpu and p.role != "ffn"]
    plans = [[(ctx, decode_batches(step, ctx, max_sequences, max_decode_batch)) for ctx in
              shape_contexts(max_context or int(step.target.context))] for step in steps]
    total = sum(max_sequences * len(rows) + len(batches) for plan in plans for _, batches in plan)
    done = 0
    for step, plan in zip(steps, plans, strict=True):
        for ctx, batches in plan:
            for n in range(1, max_sequences + 1):
                for r in rows:
                    with contextlib.suppress(DoesNotFit):
                        step.prefill(PrefillChunk(tokens=r, context=ctx, sequences=n))
            for n in batches:
                with contextlib.suppress(DoesNotFit):
                    step.decode_step(DecodeBatch.uniform(n, ctx))
            done += max_sequences * len(rows) + len(batches)
            if on_shape is not None:
                on_shape(done, total)
    return done
