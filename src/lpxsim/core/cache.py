"""A persistent, content-addressed cache of step costs (and compile summaries).

A detailed cost (a compiled LPX step, a GPU step priced from measured kernels)
is a pure function of the model spec, the system spec, the layout, the
precisions, the step shape and the cost model's code. The key is a SHA-256 of
all of those, in canonical JSON, plus a version string that hashes the source
files of the backend that computed the value: change the code and old entries
are simply never found again (no stale answers, nothing to invalidate by hand).

Entries are small files under the user cache dir (`platformdirs`), or under
`$LPXSIM_CACHE`: a JSON header line (the key and the SHA-256 of the value's
bytes) and the value's JSON. Writes go to a temporary file in the same folder
and are renamed into place, so concurrent processes (sweep workers, Dask
workers) never see half an entry; two processes computing the same key both
write the same bytes. An entry that does not parse, whose checksum does not
match its bytes (an altered number), or whose value has the wrong type or shape
for its reader (`valid=`) is deleted and recomputed, never trusted, never fatal.
`LPXSIM_NO_CACHE=1` (or `--no-cache`, or `set_enabled(False)`) bypasses the disk.
The cache root carries a marker file (`lpxsim.core.cache_files`): `lpxsim cache
clear` deletes only lpxsim's own entry files, and only in a marked folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

ENV_DIR = "LPXSIM_CACHE"
ENV_OFF = "LPXSIM_NO_CACHE"
FORMAT = 2  # bump when the on-disk entry format changes (2: header line with a checksum)


def _canonical(obj: Any) -> Any:
    """A JSON-able, order-independent form of a key part (pydantic, dataclasses, sets, tuples)."""
    t = type(obj)
    if t is str or t is int or t is bool or obj is None:  # the leaves, first: most calls end here
        return obj
    if t is float:
        return obj if math.isfinite(obj) else repr(obj)
    if hasattr(obj, "model_dump"):
        return _canonical(obj.model_dump(mode="json"))
    if is_dataclass(obj) and not isinstance(obj, type):
        return _canonical_dataclass(obj)
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(_canonical(v) for v in obj)
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else repr(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return _canonical(obj.item())
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    return repr(obj)


def _canonical_dataclass(obj: Any) -> dict[str, Any]:
    """`_canonical(asdict(obj))` without asdict's deep copy (8x faster on a model spec): the fields are
    walked directly and give the same form, so keys (and cached entries) do not change."""
    names = sorted(f.name for f in fields(obj))  # fields(): no ClassVar / InitVar, as asdict
    return {name: _canonical(getattr(obj, name)) for name in names}


def digest(*parts: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of `parts`."""
    text = json.dumps(_canonical(list(parts)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _package_dir(pkg: str) -> Path:
    """The folder of package `pkg`, found without importing it (importing a backend costs seconds)."""
    spec = importlib.util.find_spec(pkg)  # imports only the parents
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(str(resources.files(pkg)))


_SOURCE_SUFFIXES = (".py", ".json", ".yaml")
MEMO_DIR = "memo"  # small derived values (source versions, parsed data files); .txt files: never entries


def _source_files(root: Path) -> list[tuple[Path, os.stat_result]]:
    """Every .py/.json/.yaml file under `root` (the set `Path.rglob("*")` finds), with its stat."""
    found = []
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_dir():
                    if not e.is_symlink():  # as rglob: a linked folder is not entered
                        stack.append(Path(e.path))
                elif e.name.endswith(_SOURCE_SUFFIXES) and e.is_file():
                    found.append((Path(e.path), e.stat()))
    return found


@cache
def source_version(*packages: str) -> str:
    """A version string for a cost model: the hash of every .py/.json/.yaml file of `packages`
    (e.g. ``"lpxsim.lpu"``), so editing the model's code or fitted data changes every key.

    Hashing every byte costs a few ms per process (tens on a cold disk), so the answer is also kept in
    the cache folder under a hash of each file's path, size, mtime, ctime and inode: an edit, a new or
    removed file, a checkout or a reinstall changes that signature and the files are hashed again."""
    listed = [(pkg, _package_dir(pkg)) for pkg in sorted(packages)]
    files = {pkg: sorted(_source_files(root)) for pkg, root in listed}
    sig = stat_signature([(f"{pkg}:{p.relative_to(root)}", st) for pkg, root in listed for p, st in files[pkg]],
                         *(f"{pkg}={root}" for pkg, root in listed))
    text = read_memo("source", sig)
    if text is not None and len(text) == 16 and all(c in "0123456789abcdef" for c in text):
        return text
    h = hashlib.sha256(str(FORMAT).encode())
    for pkg, root in listed:
        for p, _ in files[pkg]:
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    version = h.hexdigest()[:16]
    write_memo("source", sig, version)
    return version


def stat_signature(files: Iterable[tuple[str, os.stat_result]], *extra: str) -> str:
    """A hash of files' names and stats (size, mtime, ctime, inode): any edit, replacement, checkout or
    reinstall of one of them changes it. The key of a memo of something derived from their bytes."""
    h = hashlib.sha256(str(FORMAT).encode())
    for part in extra:
        h.update(f"\0{part}".encode())
    for name, st in files:
        h.update(f"\0{name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}".encode())
    return h.hexdigest()[:32]


def _memo_path(kind: str, signature: str) -> Path | None:
    c = step_cache()
    return c.root / MEMO_DIR / f"{kind}-{signature}.txt" if c.enabled else None


def read_memo(kind: str, signature: str) -> str | None:
    """The text remembered for (`kind`, `signature`) in the cache folder, or None (missing, unreadable,
    or the cache is off)."""
    path = _memo_path(kind, signature)
    if path is None:
        return None
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    return unseal(raw)


def write_memo(kind: str, signature: str, text: str) -> None:
    """Remember `text` for (`kind`, `signature`): atomic rename; a failed write only loses the memo."""
    path = _memo_path(kind, signature)
    if path is None:
        return
    with contextlib.suppress(OSError):
        step_cache().prepare_root()
        _atomic_write_bytes(path, seal(text.encode()))


def seal(data: bytes) -> bytes:
    """`data` behind a line holding its SHA-256: `unseal` gives it back only when it is unaltered."""
    return hashlib.sha256(data).hexdigest().encode() + b"\n" + data


def unseal(raw: bytes) -> str | None:
    """The text `seal` stored, or None when the file is damaged or was edited."""
    head, sep, data = raw.partition(b"\n")
    if not sep or hashlib.sha256(data).hexdigest().encode() != head:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a `.tmp-` file in the same folder and a rename: a reader sees the old
    file or the whole new one, never part of one (concurrent sweep and Dask workers share the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def default_dir() -> Path:
    """`$LPXSIM_CACHE`, else the platform's user cache dir for lpxsim (a UserError naming LPXSIM_CACHE
    when it cannot be a folder: an unknown `~user`, a NUL, a name too long)."""
    env = os.environ.get(ENV_DIR)
    if env:
        from lpxsim.core.errors import UserError
        from lpxsim.core.inputs import check_path

        try:
            path = Path(env).expanduser()
        except RuntimeError:  # "Could not determine home directory" for an unknown ~user
            raise UserError(ENV_DIR, f"cannot expand {env[:60]!r}: no such user's home folder") from None
        path = check_path(path, ENV_DIR)
        if path.exists() and not path.is_dir():  # a cache there could never be written: said, not ignored
            raise UserError(ENV_DIR, f"{str(path)!r} is not a folder; point LPXSIM_CACHE at a folder (or unset it)")
        return path
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("lpxsim", appauthor=False)) / "steps"


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    corrupt: int = 0


class StepCache:
    """Content-addressed JSON entries on disk, with an in-process layer in front."""

    def __init__(self, root: Path | None = None, enabled: bool | None = None) -> None:
        self._root = root
        self.enabled = (os.environ.get(ENV_OFF, "") in ("", "0")) if enabled is None else enabled
        self._memory: dict[str, Any] = {}
        self._prepared: set[Path] = set()
        self.stats = CacheStats()

    @property
    def root(self) -> Path:
        return self._root if self._root is not None else default_dir()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, valid: Callable[[Any], bool] | None = None) -> Any | None:
        """The stored value of `key`, or None (missing, disabled, or corrupt: the entry is removed).

        Corrupt: not parseable, another key's entry, a checksum that does not match the value's bytes,
        or a value that `valid` rejects (the wrong type or shape for the caller)."""
        if key in self._memory:
            hit = self._memory[key]
            if valid is None or _accepts(valid, hit):
                self.stats.hits += 1
                return hit
            del self._memory[key]
            return None
        if not self.enabled:
            return None
        path = self._path(key)
        try:
            raw = path.read_bytes()
        except OSError:
            return None
        value = read_entry(raw, key)
        if value is _CORRUPT or (valid is not None and not _accepts(valid, value)):
            self.stats.corrupt += 1
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        self.stats.hits += 1
        self._memory[key] = value
        return value

    def put(self, key: str, value: Any) -> None:
        """Store `value` (JSON-able) under `key`: atomic rename; a failed write only loses the entry."""
        self._memory[key] = value
        if not self.enabled:
            return
        try:
            self.prepare_root()
            _atomic_write_bytes(self._path(key), entry_bytes(key, value))
            self.stats.writes += 1
        except OSError:
            pass  # a read-only or full disk costs speed, never an answer

    def prepare_root(self) -> None:
        """Create the cache folder with its marker (`cache_files.mark_root`), once per process."""
        root = self.root
        if root not in self._prepared:
            from lpxsim.core.cache_files import mark_root

            mark_root(root)
            self._prepared.add(root)

    def get_or_compute(self, namespace: str, version: str, parts: Iterable[Any],
                       compute: Callable[[], Any], valid: Callable[[Any], bool] | None = None) -> Any:
        """The cached value for (namespace, version, parts), computing and storing it on a miss (and
        when the stored value fails `valid`)."""
        key = digest(namespace, version, *parts)
        hit = self.get(key, valid)
        if hit is not None:
            return hit
        self.stats.misses += 1
        value = compute()
        self.put(key, value)
        return value

    def info(self) -> dict[str, Any]:
        """Where the cache lives, whether it is used, and how many entries and bytes it holds."""
        from lpxsim.core.cache_files import entry_files, is_marked

        entries, size = 0, 0
        root = self.root
        for p in entry_files(root):
            entries += 1
            with contextlib.suppress(OSError):
                size += p.stat().st_size
        return {"path": str(root), "enabled": self.enabled, "entries": entries, "bytes": size,
                "marked": is_marked(root)}

    def clear(self) -> int:
        """Delete lpxsim's own entries (`cache_files.clear_root`); returns how many were removed. A folder
        without lpxsim's marker is refused (UserError): lpxsim did not create it."""
        from lpxsim.core.cache_files import clear_root

        self._memory.clear()
        return clear_root(self.root)


_CORRUPT = object()


def entry_bytes(key: str, value: Any) -> bytes:
    """An entry file: a header line {key, sha256 of the value's bytes} and the value's JSON."""
    body = json.dumps(value, separators=(",", ":")).encode()  # dumps, not dump: dump is pure Python
    head = json.dumps({"key": key, "sha256": hashlib.sha256(body).hexdigest()}, separators=(",", ":")).encode()
    return head + b"\n" + body


def read_entry(raw: bytes, key: str) -> Any:
    """The value of an entry file of `key`, or `_CORRUPT` (garbage, another key, a checksum mismatch)."""
    head, sep, body = raw.partition(b"\n")
    try:
        header = json.loads(head)
        if (not sep or not isinstance(header, dict) or header.get("key") != key
                or header.get("sha256") != hashlib.sha256(body).hexdigest()):
            return _CORRUPT
        return json.loads(body)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, absurdly nested
        return _CORRUPT


def _accepts(valid: Callable[[Any], bool], value: Any) -> bool:
    try:
        return bool(valid(value))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        return False


_DEFAULT: StepCache | None = None


def step_cache() -> StepCache:
    """The process-wide cache (honours $LPXSIM_CACHE and $LPXSIM_NO_CACHE at first use)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = StepCache()
    return _DEFAULT


def set_enabled(enabled: bool) -> None:
    """Turn the disk layer on or off for this process (`--no-cache`)."""
    step_cache().enabled = enabled
    os.environ[ENV_OFF] = "0" if enabled else "1"  # worker processes started from here inherit it


def reset() -> None:
    """Forget the process-wide cache object (tests that move $LPXSIM_CACHE)."""
    global _DEFAULT
    _DEFAULT = None


_EXIT_HOOKS: dict[Callable[[], None], int] = {}


def flush_at_exit(flush: Callable[[], None]) -> None:
    """Run `flush` when this process ends: at interpreter exit, and in a multiprocessing worker (a sweep's
    process pool), whose exit skips atexit but runs multiprocessing's finalizers. Cheap to call on every
    write: once per process and function (a forked child inherits the atexit entry, not the finalizer)."""
    import sys

    pid = os.getpid()
    last = _EXIT_HOOKS.get(flush, 0)
    if last == pid:
        return
    _EXIT_HOOKS[flush] = pid
    if last == 0:
        import atexit

        atexit.register(flush)
    mp = sys.modules.get("multiprocessing")
    if mp is not None and mp.parent_process() is not None:
        from multiprocessing.util import Finalize

        Finalize(None, flush, exitpriority=10)
