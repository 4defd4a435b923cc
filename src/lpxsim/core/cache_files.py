"""Which files in the cache folder are lpxsim's: the root marker, entry files, memo files.

`$LPXSIM_CACHE` may name any folder, including one full of the user's own files. So lpxsim marks a
cache root it creates (or finds empty, or holding only lpxsim's own layout from before the marker)
with `MARKER`, and `lpxsim cache clear`:

- refuses a folder without the marker (UserError naming LPXSIM_CACHE): lpxsim did not create it;
- deletes only files it wrote: `XX/<64 hex>.json` entries whose header names that very key,
  `memo/<kind>-<32 hex>.txt` memos whose checksum line matches, and its own `.tmp-` files;
- removes a folder only when that left it empty. Anything else in the folder stays.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

from lpxsim.core.cache import MEMO_DIR, unseal
from lpxsim.core.errors import UserError

MARKER = ".lpxsim-cache"
MARKER_TEXT = "This folder is lpxsim's step-cost cache. `lpxsim cache clear` deletes only lpxsim's entries here.\n"
_SHARD = re.compile(r"^[0-9a-f]{2}$")
_ENTRY = re.compile(r"^[0-9a-f]{64}\.json$")
_MEMO = re.compile(r"^[a-z0-9_]+-[0-9a-f]{32}\.txt$")
_TMP = re.compile(r"^\.tmp-[a-z0-9_]{8}\.(json|txt)$")  # tempfile.mkstemp's 8 random characters


def is_marked(root: Path) -> bool:
    """Whether `root` carries lpxsim's marker."""
    return (root / MARKER).is_file()


def _looks_like_ours(root: Path) -> bool:
    """An unmarked folder that is empty, or holds only lpxsim's layout (a cache from before the marker)."""
    for e in os.scandir(root):
        if e.name in (MEMO_DIR, MARKER) or (_SHARD.match(e.name) and e.is_dir(follow_symlinks=False)):
            continue
        return False
    return True


def mark_root(root: Path) -> None:
    """Create `root` if needed and mark it as lpxsim's cache (not a folder with other content)."""
    if is_marked(root):
        return
    root.mkdir(parents=True, exist_ok=True)
    if _looks_like_ours(root):
        with contextlib.suppress(FileExistsError):
            fd = os.open(root / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "w") as f:
                f.write(MARKER_TEXT)


OLD_ENTRY_MAX_BYTES = 256 * 1024**2


def _own_entry(path: Path) -> bool:
    """An entry file whose header line names the key its file name is (either entry format: a header
    line, or before it one JSON object with the key and the value)."""
    try:
        with open(path, "rb") as f:
            head = f.readline(4096)
            if not head.endswith(b"\n") and len(head) == 4096:  # a one-line entry of the first format
                head += f.read(OLD_ENTRY_MAX_BYTES)
        header = json.loads(head)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(header, dict) and header.get("key") == path.stem


def _own_memo(path: Path) -> bool:
    try:
        return unseal(path.read_bytes()) is not None
    except OSError:
        return False


def entry_files(root: Path) -> Iterator[Path]:
    """lpxsim's entry files under `root` (by name: `XX/<64 hex>.json` in a shard folder `XX`)."""
    if not root.is_dir():
        return
    for shard in sorted(root.iterdir()):
        if _SHARD.match(shard.name) and shard.is_dir() and not shard.is_symlink():
            for p in sorted(shard.iterdir()):
                if _ENTRY.match(p.name) and p.name.startswith(shard.name) and p.is_file() and not p.is_symlink():
                    yield p


def _own_files(root: Path) -> Iterator[tuple[Path, bool]]:
    """(path, is an entry) of every file lpxsim wrote under `root`: checked by content, not only by name."""
    for p in entry_files(root):
        if _own_entry(p):
            yield p, True
    folders = [root / MEMO_DIR] + [d for d in root.iterdir() if _SHARD.match(d.name)]
    for d in folders:
        if not d.is_dir() or d.is_symlink():
            continue
        for p in d.iterdir():
            if p.is_symlink() or not p.is_file():
                continue
            if _TMP.match(p.name) or (d.name == MEMO_DIR and _MEMO.match(p.name) and _own_memo(p)):
                yield p, False


def clear_root(root: Path) -> int:
    """Delete lpxsim's files under a marked `root`; returns how many entries were removed."""
    if not root.exists():
        return 0
    if not root.is_dir():
        raise UserError("LPXSIM_CACHE", f"{str(root)!r} is not a folder; nothing was deleted")
    if not is_marked(root):
        raise UserError("LPXSIM_CACHE", f"{str(root)!r} has no {MARKER} marker, so lpxsim did not create it; "
                                        "nothing was deleted (point LPXSIM_CACHE at lpxsim's own cache folder)")
    removed = 0
    for p, is_entry in list(_own_files(root)):
        try:
            p.unlink()
            removed += is_entry
        except OSError:
            pass
    for d in root.iterdir():
        if (d.name == MEMO_DIR or _SHARD.match(d.name)) and d.is_dir() and not d.is_symlink():
            with contextlib.suppress(OSError):
                d.rmdir()  # only an empty folder goes
    return removed
