"""Prepare a fleet's LPX deployments before a run: compile every step shape a serving run can ask.

The LPX compiler emits its schedules before the workload starts; lpxsim compiles a step shape the first time
a run asks for it, so which programs a run compiles depends on its draws (a chunk's tail of 32 rows, three
sequences prefilling together), and a cold run spends most of its time compiling. `prepare_shapes` asks
each LPX pool's step model the whole shape space up front: prefill chunks of 1..`max_sequences` sequences at
every power-of-two sub-chunk size the backend compiles (1..`PREFILL_ROWS` rows), decode batches of
1..`max_sequences`, at a context inside every bracket of the context grid up to `max_context`. The step cache
keeps the programs' summaries, so a later process (or run) compiles none of them again. GPU pools price
shapes analytically in microseconds and need no preparation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from lpxsim.catalog import get_system
from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.lpu.stepmodel import PREFILL_ROWS
from lpxsim.serving.backends import make_step_model
from lpxsim.serving.config import FleetConfig
from lpxsim.step.protocol import DecodeBatch, PrefillChunk


def shape_contexts(max_context: int) -> list[int]:
    """Contexts that fall inside every bracket of the LPX context grid (its buckets are 0, 1K, 4K, 16K, ...;
    one context per 8K above 8K also lands in each of the sparse grids' brackets), and `max_context`."""
    return sorted({c for c in (0, 512, 1024, 2048, 4096, *range(8192, max_context, 8192)) if c < max_context}
                  | {max_context})


def prepare_shapes(fleet: FleetConfig, max_context: int, max_sequences: int = 8,
                   on_shape: Callable[[int, int], None] | None = None) -> int:
    """Ask every LPX pool of `fleet` each step shape up to `max_context` tokens and `max_sequences` sequences
    (compiling what the step cache lacks); returns the shapes asked. A shape the replica cannot hold is
    skipped (a run would be refused it too). `on_shape(done, total)` reports progress."""
    if max_context < 1:
        raise UserError("max_context", f"expected a positive number of tokens, got {max_context}")
    if max_sequences < 1:
        raise UserError("max_sequences", f"expected at least one sequence, got {max_sequences}")
    rows = [1 << i for i in range(PREFILL_ROWS.bit_length())]
    contexts = shape_contexts(max_context)
    # the pools whose replica is one whole LPX model (an AFD FFN side compiles only its own part at run time)
    pools = [p for p in fleet.pools if get_system(p.system).is_lpu and p.role != "ffn"]
    total = len(pools) * max_sequences * len(contexts) * (len(rows) + 1)
    done = 0
    for pool in pools:
        step = make_step_model(pool)
        for n in range(1, max_sequences + 1):
            for ctx in contexts:
                for r in rows:
                    with contextlib.suppress(DoesNotFit):
                        step.prefill(PrefillChunk(tokens=r, context=ctx, sequences=n))
                with contextlib.suppress(DoesNotFit):
                    step.decode_step(DecodeBatch.uniform(n, ctx))
                done += len(rows) + 1
                if on_shape is not None:
                    on_shape(done, total)
    return done
