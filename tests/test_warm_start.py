"""A warm `lpxsim estimate` (issue 10 item 3): the cheap paths it takes must give what the slow ones gave.

- `cache._canonical` walks dataclasses without `asdict`: the same canonical form, so the same keys.
- `cache.source_version` remembers its hash under a stat signature of the files: an edit still changes it.
- `datafile.read_yaml` answers an unchanged file from a JSON memo, an edited one from the file.
- A warm estimate imports neither numpy, PyYAML nor a backend.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import namedtuple
from dataclasses import asdict, dataclass, field, is_dataclass
from datetime import date
from pathlib import Path
from typing import Any, ClassVar

import pytest

from lpxsim import catalog
from lpxsim.backends.factory import Layout
from lpxsim.core import cache
from lpxsim.core.datafile import read_yaml


def _reference(obj: Any) -> Any:
    """The canonical form as it was first written (asdict, then a walk): the definition of the keys."""
    if hasattr(obj, "model_dump"):
        return _reference(obj.model_dump(mode="json"))
    if is_dataclass(obj) and not isinstance(obj, type):
        return _reference(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _reference(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_reference(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(_reference(v) for v in obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else repr(obj)
    if hasattr(obj, "item") and callable(obj.item):
        return _reference(obj.item())
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    return repr(obj)


Pair = namedtuple("Pair", "a b")


@dataclass(frozen=True)
class _Inner:
    x: float = 1.5
    tags: frozenset = frozenset({"b", "a"})


@dataclass
class _Outer:
    kind: ClassVar[str] = "outer"  # not a field: neither form includes it
    inner: _Inner = field(default_factory=_Inner)
    pairs: tuple = (Pair(1, _Inner(x=math.inf)), [2.0, None, True])
    by_name: dict = field(default_factory=lambda: {"z": _Inner(), 3: "three"})
    path: Path = Path("/x/y")


@pytest.mark.parametrize("obj", [_Outer(), _Inner(x=-math.nan), Layout(), Layout(isl=10000, osl=1000, tp=4)])
def test_canonical_matches_the_asdict_walk(obj: Any) -> None:
    assert cache._canonical(obj) == _reference(obj)
    assert cache.digest("k", obj) == cache.digest("k", _reference(obj))


def test_canonical_matches_on_every_catalog_spec() -> None:
    specs = [catalog.get_model(n) for n in catalog.model_names()] + catalog.all_systems()
    for spec in specs:
        assert cache._canonical(spec) == _reference(spec), spec.name


@pytest.fixture
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A throwaway package `warmpkg` (two source files) on sys.path, with an empty cache folder."""
    root = tmp_path / "src" / "warmpkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("A = 1\n")
    (root / "sub" / "data.json").write_text('{"k": 1}\n')
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    monkeypatch.delenv(cache.ENV_OFF, raising=False)
    cache.reset()
    cache.source_version.cache_clear()
    yield root
    cache.source_version.cache_clear()
    cache.reset()


def _fresh(*packages: str) -> str:
    """source_version as a new process sees it (no in-process memo)."""
    cache.source_version.cache_clear()
    return cache.source_version(*packages)


def _memos(pkg: Path) -> list[Path]:
    return sorted((pkg.parents[1] / "cache" / cache.MEMO_DIR).glob("source-*.txt"))


def test_source_version_is_remembered_and_an_edit_changes_it(pkg: Path) -> None:
    v1 = _fresh("warmpkg")
    [memo] = _memos(pkg)
    assert cache.unseal(memo.read_bytes()) == v1 and _fresh("warmpkg") == v1
    memo.write_bytes(cache.seal(b"0123456789abcdef"))  # the memo is what a later process answers from...
    assert _fresh("warmpkg") == "0123456789abcdef"
    memo.write_bytes(cache.seal(b"not a version"))  # ...unless it is unusable: then the files are hashed again
    assert _fresh("warmpkg") == v1
    memo.write_bytes(memo.read_bytes().replace(v1.encode(), b"0123456789abcdef"))  # edited: checksum fails
    assert _fresh("warmpkg") == v1

    data = pkg / "sub" / "data.json"
    data.write_text('{"k": 2}\n')  # same size, new bytes
    st = data.stat()
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # (coarse clocks: a sure new mtime)
    v2 = _fresh("warmpkg")
    assert v2 != v1 and len(_memos(pkg)) == 2
    (pkg / "sub" / "more.py").write_text("")  # a new file
    v3 = _fresh("warmpkg")
    assert v3 not in (v1, v2)
    (pkg / "sub" / "more.py").unlink()
    assert _fresh("warmpkg") == v2  # the same bytes as before: the same version (content-addressed)


def test_source_version_memo_follows_the_cache_switch(pkg: Path) -> None:
    cache.set_enabled(False)
    try:
        v = _fresh("warmpkg")
        assert not _memos(pkg)
    finally:
        cache.set_enabled(True)
    assert _fresh("warmpkg") == v and len(_memos(pkg)) == 1
    assert cache.step_cache().clear() == 0 and not _memos(pkg)  # cleared too, and not counted as an entry


def test_read_yaml_is_remembered_and_an_edit_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.ENV_DIR, str(tmp_path / "cache"))
    monkeypatch.delenv(cache.ENV_OFF, raising=False)
    cache.reset()
    memos = lambda: sorted((tmp_path / "cache" / cache.MEMO_DIR).glob("yaml-*.txt"))  # noqa: E731
    f = tmp_path / "s.yaml"
    f.write_text("name: a\nchips: 8\npower: 1500.5\ntags: [x, y]\nnote: null\n")
    want = {"name": "a", "chips": 8, "power": 1500.5, "tags": ["x", "y"], "note": None}
    assert read_yaml(f) == want and len(memos()) == 1
    memos()[0].write_bytes(cache.seal(b'{"name": "from the memo"}'))  # an unchanged file: answered from its memo
    assert read_yaml(f) == {"name": "from the memo"}
    memos()[0].write_text("{not json")  # a damaged memo: the file is parsed again
    assert read_yaml(f) == want
    f.write_text("name: b\nchips: 8\npower: 1500.5\ntags: [x, y]\nnote: null\n")  # same size
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert read_yaml(f)["name"] == "b"
    for text, value in (("1: one\n", {1: "one"}), ("d: 2026-12-03\n", {"d": date(2026, 12, 3)})):
        g = tmp_path / "g.yaml"
        g.write_text(text)
        n = len(memos())
        assert read_yaml(g) == value and read_yaml(g) == value  # not JSON-safe: parsed every time, no memo
        assert len(memos()) == n
    cache.set_enabled(False)
    try:
        h = tmp_path / "h.yaml"
        h.write_text("k: 1\n")
        n = len(memos())
        assert read_yaml(h) == {"k": 1} and len(memos()) == n
    finally:
        cache.set_enabled(True)
        cache.reset()


_PROBE = """
import atexit, sys
def _report():
    sys.stderr.write("PROBE " + repr([m for m in ("numpy", "yaml", "lpxsim.gpu", "lpxsim.lpu") if m in sys.modules]) + "\\n")
atexit.register(_report)
sys.argv = ["lpxsim"] + sys.argv[1:]
from lpxsim.cli.main import run
run()
"""


def test_a_warm_estimate_imports_no_numpy_no_yaml_and_no_backend(tmp_path: Path) -> None:
    args = ["estimate", "llama-3.1-8b", "--system", "h200-hgx", "--gpus", "1", "--tp", "1", "--isl", "2000",
            "--osl", "200", "--json"]
    env = {**os.environ, cache.ENV_DIR: str(tmp_path / "c")}
    env.pop(cache.ENV_OFF, None)
    seen = []
    for _ in range(2):  # cold (fills the cache), then warm
        res = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, env=env)
        assert res.returncode == 0, res.stderr
        seen.append(next(ln for ln in res.stderr.splitlines() if ln.startswith("PROBE ")))
    assert "lpxsim.gpu" in seen[0]  # cold: the backend priced the steps
    assert seen[1] == "PROBE []"
