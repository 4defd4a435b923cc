"""Many small cached values kept as one step-cache entry (a "book"), read once, written once at exit.

A cold GPU estimate derives a few hundred small values (curves and distinct values read from the
measured tables, priced steps of each layout of a search). One cache file per value meant a few
hundred digests, temp files and renames per process; a book is one file per source (a GPU and
framework's tables, a model on a system): read on first use, merged with what another process wrote
and written atomically when this process ends (`lpxsim.core.cache.StepCache.put`). Losing a write
(a killed process, two processes racing) only costs a recomputation, never a wrong value: every
value in a book is a pure function of its key and the book's identity (which carries the version
of whatever computed it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ENTRY_LIMIT = 50_000  # values per book beyond which new ones stay in memory only (the file stays small)
_MISSING = object()


class Book:
    """The values of one cache entry, keyed by short strings."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._values: dict[str, Any] | None = None
        self._new: dict[str, Any] = {}

    def _load(self) -> dict[str, Any]:
        if self._values is None:
            from lpxsim.core.cache import step_cache

            stored = step_cache().get(self.key)
            self._values = dict(stored) if isinstance(stored, dict) else {}  # anything else: rebuilt
        return self._values

    def get_or_compute(self, name: str, compute: Callable[[], Any],
                       valid: Callable[[Any], bool] | None = None) -> Any:
        """The value of `name`, computing (and remembering) it on a miss, or when the stored value fails
        `valid` (the wrong type or shape: recomputed, never a TypeError further on)."""
        values = self._load()
        hit = values.get(name, _MISSING)
        if hit is not _MISSING and valid is not None and not _accepts(valid, hit):
            hit = _MISSING
        if hit is _MISSING:
            hit = values[name] = compute()
            if len(self._new) < ENTRY_LIMIT:
                self._new[name] = hit
                _on_exit()
        return hit

    def flush(self) -> None:
        """Write the values this process added, merged with the entry as it is on disk now."""
        if not self._new:
            return
        from lpxsim.core.cache import step_cache

        cache = step_cache()
        cache._memory.pop(self.key, None)  # re-read the disk: another process may have added values
        theirs = cache.get(self.key)
        merged = dict(theirs) if isinstance(theirs, dict) else {}
        merged.update(self._new)
        self._new = {}
        self._values = merged
        cache.put(self.key, merged)


def _accepts(valid: Callable[[Any], bool], value: Any) -> bool:
    try:
        return bool(valid(value))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        return False


_BOOKS: dict[str, Book] = {}


def book(key: str) -> Book:
    """The process's book of cache entry `key`."""
    b = _BOOKS.get(key)
    if b is None:
        b = _BOOKS[key] = Book(key)
    return b


def flush_all() -> None:
    """Write every book that gained values (at exit; also callable by long-lived workers and tests)."""
    for b in list(_BOOKS.values()):
        b.flush()


def reset() -> None:
    """Flush and forget this process's books (tests that move $LPXSIM_CACHE)."""
    flush_all()
    _BOOKS.clear()


def _on_exit() -> None:
    """Flush the books at interpreter exit, and in a multiprocessing worker (whose exit skips atexit)."""
    from lpxsim.core.cache import flush_at_exit

    flush_at_exit(flush_all)
