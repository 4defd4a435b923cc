"""The compiler hands freed C-heap pages back between phases (`lpxsim.lpu.memtrim`)."""

from __future__ import annotations

import platform

from lpxsim.lpu import memtrim


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmRSS")).split()[1])


def test_release_free_memory_trims_on_glibc_and_is_a_no_op_elsewhere() -> None:
    """On glibc the trim runs and gives back the pages of freed heap blocks held below a live one; the call
    is harmless anywhere (False where the C library has no `malloc_trim`)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        assert memtrim.release_free_memory() is False
        return
    # 64 KiB blocks stay in the heap (below the mmap threshold); the last one, kept, pins them below it
    blocks = [bytearray(64 * 1024) for _ in range(1600)]  # ~100 MB, each page touched by the zero fill
    keep = bytearray(64 * 1024)
    del blocks
    before = _rss_kb()
    assert memtrim.release_free_memory() is True
    assert before - _rss_kb() > 50_000  # most of the ~100 MB given back
    del keep
