"""Run a compiler stage with Python's cyclic garbage collector paused (restored after, also on error)."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


def gc_paused(fn: F) -> F:
    """Decorate `fn` to run with the cyclic GC off. A compile allocates ~10^5-10^6 long-lived records
    (instructions, transfers, buffers, provenance) and no cycles worth collecting; the collector's repeated
    scans of them cost a quarter of a compile for nothing. Nested calls leave it off until the outermost
    returns.

    On the way out the objects allocated meanwhile are moved to the oldest generation unscanned
    (`gc.freeze()` then `gc.unfreeze()`, both O(1)): re-enabled with ~10^5 young objects, the collector's
    next young-generation pass would walk them all (a quarter of a second per step-model compile). Any
    cyclic garbage among them is left to the next full collection. Skipped when the caller has frozen
    objects of its own (unfreezing would release theirs)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was:
                if gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()

    return run  # type: ignore[return-value]
