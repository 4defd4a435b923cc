"""Hand the C heap's free pages back to the operating system between compile phases (peak memory).

A large compile frees ~10^2 MB of C-heap memory between its phases (the scheduler's ready and provenance
columns, placement's columns, dict tables, lists). glibc keeps freed heap memory for reuse rather than
returning it, so the resident set stays at the earlier phase's high-water mark while the next phase
(placement, then `verify`) allocates on top of it. `malloc_trim(0)` gives the free pages back: measured on
DeepSeek-V3 on 8 racks, the resident set after the build goes from ~500 to ~410 MB in ~6 ms (long-running
Python services call it for the same reason; docs/sources.md). Python's own small-object arenas are untouched:
pymalloc returns an arena when it empties.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None where the C library has none (macOS, Windows, musl)."""
    try:
        return getattr(ctypes.CDLL(None), "malloc_trim", None)
    except (OSError, TypeError):  # no C library handle for the process (Windows)
        return None


def release_free_memory() -> bool:
    """Return the C heap's free pages to the operating system; whether the platform could (glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
