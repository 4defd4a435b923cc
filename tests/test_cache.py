"""The content-addressed step-cost cache: keys, atomic entries, corrupt entries, concurrent writers."""

from __future__ import annotations

import json
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


# --- issue 30: entries guarded by a checksum and by their shape; `cache clear` deletes only lpxsim's -------

def _entry_path(c: cache.StepCache, key: str):
    return c.root / key[:2] / f"{key}.json"


def test_an_altered_number_is_not_trusted(fresh_cache):
    """Editing a number in an entry breaks its checksum: the value is recomputed, not answered."""
    key = cache.digest("t", "v1", 1)
    fresh_cache.put(key, {"latency_s": 0.125, "interval_s": 0.5})
    path = _entry_path(fresh_cache, key)
    path.write_bytes(path.read_bytes().replace(b"0.125", b"0.925"))
    cache.reset()
    c = cache.step_cache()
    assert c.get_or_compute("t", "v1", [1], lambda: {"latency_s": 0.125, "interval_s": 0.5})["latency_s"] == 0.125
    assert c.stats.corrupt == 1 and c.stats.misses == 1


def test_an_entry_of_the_wrong_shape_is_recomputed(fresh_cache):
    """A well-formed entry (checksum right) whose value the reader cannot use is recomputed, not a TypeError."""
    key = cache.digest("t", "v1", 2)
    fresh_cache.put(key, ["a", "list", "where", "a", "dict", "belongs"])
    cache.reset()
    c = cache.step_cache()
    v = c.get_or_compute("t", "v1", [2], lambda: {"ok": 1}, valid=lambda v: isinstance(v, dict) and "ok" in v)
    assert v == {"ok": 1} and c.stats.corrupt == 1
    cache.reset()
    assert cache.step_cache().get(key) == {"ok": 1}  # the rewritten entry


def _step_table_entry(fresh_cache):
    """A real step table in the cache (from a GPU estimate) and its key."""
    from lpxsim.backends import memo

    o = _estimate()
    assert o.returncode == 0, o.stderr
    # a step table is a mapping with a "decode" part (the GPU book's entries mention decode in their keys)
    keys = [p.stem for p in sorted(fresh_cache.root.glob("*/*.json"))
            if isinstance(v := cache.read_entry(p.read_bytes(), p.stem), dict) and "decode" in v]
    assert keys
    memo.reset()
    return keys[0]


def _estimate():
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "estimate", "llama-3.1-8b", "--system", "h200-hgx",
                           "--gpus", "1", "--isl", "1000", "--osl", "100", "--concurrency", "2", "--json"],
                          capture_output=True, text=True, env={**os.environ}, timeout=300)


def test_step_tables_with_altered_or_mistyped_content_give_the_same_answer(fresh_cache):
    """Altering a stored cost, or giving it the wrong type (a string, a list of three), never changes
    the answer and never raises: the table is rebuilt."""
    clean = json.loads(_estimate().stdout)
    key = _step_table_entry(fresh_cache)
    path = _entry_path(fresh_cache, key)
    table = cache.read_entry(path.read_bytes(), key)
    shape = next(iter(table["decode"]))
    for bad in ("fast", [1.0, 2.0, 3.0], None, {"x": 1}, [-1.0, 0.0]):
        table["decode"][shape] = bad
        path.write_bytes(cache.entry_bytes(key, table))  # a consistent checksum: only the shape is wrong
        o = _estimate()
        assert o.returncode == 0, o.stderr
        assert json.loads(o.stdout) == clean, bad
        table = cache.read_entry(path.read_bytes(), key)  # rebuilt and rewritten
    tampered = path.read_bytes().replace(b'"decode":{"', b'"decode":{"9', 1)  # altered, checksum stale
    path.write_bytes(tampered)
    assert json.loads(_estimate().stdout) == clean


def test_cache_root_is_marked_when_lpxsim_creates_it(fresh_cache):
    from lpxsim.core.cache_files import MARKER

    fresh_cache.put(cache.digest("t", "v1", 3), 3)
    assert (fresh_cache.root / MARKER).is_file()
    assert fresh_cache.info()["marked"]


def _foreign(root):
    """The user's own files, some named like lpxsim's: none may be deleted."""
    files = {
        "notes.txt": b"my notes", "ab/photo.json": b"{}", "memo/todo.txt": b"buy milk",
        f"cd/{'c' + 'd' * 63}.json": b'{"key": "not this name"}', "ef/.tmp-secret": b"keep",
        f"memo/source-{'0' * 32}.txt": b"not sealed", "sub/dir/data.json": b"[1, 2]",
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def test_clear_refuses_a_folder_lpxsim_did_not_create(tmp_path, monkeypatch):
    """LPXSIM_CACHE pointed at a folder of the user's files: `cache clear` exits 2 and deletes nothing."""
    import os
    import subprocess
    import sys

    root = tmp_path / "mine"
    files = _foreign(root)
    env = {**os.environ, "LPXSIM_CACHE": str(root)}
    res = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "cache", "clear"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert res.returncode == 2 and res.stderr.startswith("error: LPXSIM_CACHE:") and res.stderr.count("\n") == 1
    assert "nothing was deleted" in res.stderr
    for name, data in files.items():
        assert (root / name).read_bytes() == data, name
    # using that folder as a cache does not mark it (so clear keeps refusing) and harms nothing
    res = subprocess.run([sys.executable, "-m", "lpxsim.cli.main", "estimate", "llama-3.1-8b", "--system", "h200-hgx",
                          "--gpus", "1", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert not (root / ".lpxsim-cache").exists()
    for name, data in files.items():
        assert (root / name).read_bytes() == data, name


def test_clear_in_a_marked_folder_deletes_only_lpxsims_own_files(fresh_cache):
    """Foreign files placed inside lpxsim's own cache (even in its shard folders, even with entry-like
    names) survive `clear`; every entry and memo lpxsim wrote goes."""
    for i in range(4):
        fresh_cache.get_or_compute("t", "v1", [i], lambda i=i: {"v": i})
    cache.write_memo("yaml", "f" * 32, "[1]")
    root = fresh_cache.root
    files = _foreign(root)
    shards = {p.parent.name for p in root.glob("*/*.json") if p.parent.name != "cd"}
    assert fresh_cache.clear() == 4
    assert fresh_cache.info()["entries"] == 1  # the foreign entry-like file in cd/ (its key does not match)
    for name, data in files.items():
        assert (root / name).read_bytes() == data, name
    assert not list(root.glob("memo/yaml-*"))
    assert (root / ".lpxsim-cache").is_file()
    for s in shards - {"ab", "ef"}:
        assert not (root / s).exists()  # emptied shard folders go; ones holding the user's files stay


def test_a_cache_from_before_the_marker_is_adopted(tmp_path):
    """A folder holding only lpxsim's layout (entries and memos, no marker yet) is marked on next use."""
    root = tmp_path / "old"
    (root / "ab").mkdir(parents=True)
    (root / "memo").mkdir()
    old = cache.StepCache(root=root, enabled=True)
    old.put(cache.digest("t", "v1", 9), 9)
    assert (root / ".lpxsim-cache").is_file()


def test_priced_gpu_steps_of_the_wrong_shape_are_recomputed(fresh_cache):
    """The GPU book of priced steps with a value of the wrong type (and no step table in front of it):
    the same answer, no TypeError."""
    clean = json.loads(_estimate().stdout)
    books = []
    for path in fresh_cache.root.glob("*/*.json"):
        value = cache.read_entry(path.read_bytes(), path.stem)
        if isinstance(value, dict) and "decode" in value and "meta" in value:
            path.unlink()  # the step table: gone, so the book is asked
        elif isinstance(value, dict) and any(isinstance(v, dict) and "b" in v for v in value.values()):
            books.append((path, value))
    assert books
    for path, value in books:
        for name, v in value.items():
            if isinstance(v, dict) and "b" in v:
                value[name] = {"b": "fast", "s": [], "src": 3}
        path.write_bytes(cache.entry_bytes(path.stem, value))
    o = _estimate()
    assert o.returncode == 0, o.stderr
    assert json.loads(o.stdout) == clean
