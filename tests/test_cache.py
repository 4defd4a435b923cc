"""The content-addressed step-cost cache: keys, atomic entries, corrupt entries, concurrent writers."""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import dataclass

from lpxsim.core import cache


@dataclass(frozen=True)
class _Shape:
    batch: int
    context: int


def test_digest_is_order_independent_and_sensitive_to_every_part():
    a = cache.digest("ns", {"x": 1, "y": 2}, _Shape(4, 1000))
    assert a == cache.digest("ns", {"y": 2, "x": 1}, _Shape(4, 1000))
    assert a != cache.digest("ns", {"x": 1, "y": 2}, _Shape(4, 1001))
    assert a != cache.digest("other", {"x": 1, "y": 2}, _Shape(4, 1000))


def test_second_lookup_does_not_compute(fresh_cache):
    calls = []

    def compute():
        calls.append(1)
        return {"latency_s": 1e-4}

    v1 = fresh_cache.get_or_compute("t", "v1", [1, 2], compute)
    cache.reset()  # a new process: only the disk remembers
    v2 = cache.step_cache().get_or_compute("t", "v1", [1, 2], compute)
    assert v1 == v2 == {"latency_s": 1e-4}
    assert calls == [1]
    assert cache.step_cache().info()["entries"] == 1


def test_version_change_misses(fresh_cache):
    fresh_cache.get_or_compute("t", "v1", [1], lambda: 1)
    assert fresh_cache.get_or_compute("t", "v2", [1], lambda: 2) == 2


def test_corrupt_entry_is_recomputed(fresh_cache):
    key = cache.digest("t", "v1", 7)
    fresh_cache.put(key, {"a": 1})
    path = fresh_cache.root / key[:2] / f"{key}.json"
    path.write_bytes(b"\x00\xff not json")
    cache.reset()
    c = cache.step_cache()
    assert c.get_or_compute("t", "v1", [7], lambda: {"a": 2}) == {"a": 2}
    assert c.stats.corrupt == 1
    assert cache.read_entry(path.read_bytes(), key) == {"a": 2}


def test_disabled_cache_writes_nothing(fresh_cache):
    fresh_cache.enabled = False
    fresh_cache.get_or_compute("t", "v1", [1], lambda: 3)
    assert fresh_cache.info()["entries"] == 0


def test_clear_removes_entries(fresh_cache):
    for i in range(5):
        fresh_cache.get_or_compute("t", "v1", [i], lambda i=i: i)
    assert fresh_cache.clear() == 5
    assert fresh_cache.info()["entries"] == 0


def _writer(root: str, n: int) -> None:
    c = cache.StepCache(root=__import__("pathlib").Path(root), enabled=True)
    for i in range(n):
        c.get_or_compute("t", "v1", [i % 10], lambda i=i: {"value": i % 10, "pad": "x" * 4000})


def test_concurrent_writers_leave_whole_entries(tmp_path):
    root = tmp_path / "shared"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(root), 200)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    c = cache.StepCache(root=root, enabled=True)
    assert c.info()["entries"] == 10
    for i in range(10):
        assert c.get(cache.digest("t", "v1", i))["value"] == i
    assert not list(root.glob("*/.tmp-*"))


def test_source_version_changes_with_package():
    assert cache.source_version("lpxsim.lpu") != cache.source_version("lpxsim.gpu")
    assert len(cache.source_version("lpxsim.lpu")) == 16
