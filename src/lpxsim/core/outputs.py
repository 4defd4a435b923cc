"""Output files that never harm what is already there, and never half-written.

A file is written to a temporary name in the target's folder and renamed over the target, so a reader
sees the old file or the whole new one. The rename would also replace a device node, a FIFO or a
socket with a regular file (as root, `compile --trace /dev/full` replaced /dev/full), so a target that
exists and is not a regular file is refused, and so is a folder; `-` means stdout where a command
allows it. Paths are checked before any work starts (`check_output_file`, `check_output_dir`): empty
paths, names longer than the file system takes, and folders where no file can be created (e.g. under
/proc, found by creating and removing a probe file) are one UserError naming the option.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from lpxsim.core.errors import UserError
from lpxsim.core.inputs import check_path

STDOUT = "-"
_UMASK = os.umask(0)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK  # what open() would have given; mkstemp alone gives 0600


def _refuse_special(p: Path, field: str) -> None:
    """A UserError when `p` exists and is not a regular file (a link to a regular file is fine)."""
    try:
        st = p.stat()
    except FileNotFoundError:
        return
    except OSError as e:
        raise UserError(field, f"cannot use {str(p)!r}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(field, f"{str(p)!r} is a directory; expected a file path")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                or stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise UserError(field, f"{str(p)!r} is {kind}; lpxsim only replaces regular files")


def _probe(folder: Path, field: str) -> None:
    """Create and remove a temporary file in `folder`: the write at the end of the command will work."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".lpxsim-probe-", dir=folder)
    except OSError as e:
        raise UserError(field, f"cannot create files in {str(folder)!r}: {e.strerror or e}") from None
    os.close(fd)
    Path(tmp).unlink(missing_ok=True)


def check_output_dir(path: str | Path, field: str = "out") -> Path:
    """An output folder that exists (and takes new files) or can be created, checked before any work."""
    p = check_path(path, field)
    for parent in (p, *p.parents):
        try:
            exists = parent.exists()
        except OSError as e:
            raise UserError(field, f"cannot use {str(p)!r}: {e.strerror or e}") from None
        if exists:
            if not parent.is_dir():
                what = "" if parent == p else f" ({str(parent)!r} is a file)"
                raise UserError(field, f"{str(p)!r} is not a directory{what}")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise UserError(field, f"cannot write into {str(parent)!r}")
            _probe(parent, field)
            return p
    return p


# The file lpxsim leaves in every results folder it writes (a report, a sweep, a simulation's tables, an emitted
# plan): a folder that already holds files is written into only if it carries it, so a user's own `index.html`
# or `README.md` is never replaced by one of the same name (`claim_output_dir`).
OWNED_MARKER = ".lpxsim-output"


def claim_output_dir(path: str | Path, field: str = "out") -> Path:
    """`check_output_dir`, and a folder that exists must be empty or one lpxsim wrote (its OWNED_MARKER): the
    files a command writes there replace those of an earlier run of lpxsim, never a user's own."""
    p = check_output_dir(path, field)
    if p.is_dir() and not (p / OWNED_MARKER).exists():
        try:
            others = sorted(e.name for e in p.iterdir())
        except OSError as e:
            raise UserError(field, f"cannot list {str(p)!r}: {e.strerror or e}") from None
        if others:
            shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            raise UserError(field, f"{str(p)!r} already holds files lpxsim did not write ({shown}); give a new or "
                                   f"empty folder")
    return p


def mark_output_dir(path: str | Path, field: str = "out") -> Path:
    """Create the results folder `path` (and its parents) and mark it as lpxsim's (`claim_output_dir`)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        marker = p / OWNED_MARKER
        if not marker.exists():
            marker.write_text("lpxsim wrote the results in this folder; a later run may replace them.\n")
    except OSError as e:
        raise UserError(field, f"cannot write into {str(p)!r}: {e.strerror or e}") from None
    return p


def check_output_file(path: str | Path, field: str, allow_stdout: bool = False,
                      reads: dict[str, str | Path | None] | None = None) -> Path:
    """An output file path: `-` (stdout) where allowed, or a path whose folder takes files and which is
    absent or a regular file (never a folder, a device, a FIFO or a socket), and never one of the files the
    command reads (`reads`: option -> path; `compile cfg.json --trace cfg.json` replaced its own config)."""
    if allow_stdout and str(path) == STDOUT:
        return Path(STDOUT)
    p = check_path(path, field)
    _refuse_special(p, field)
    for option, src in (reads or {}).items():
        if src is not None and str(src) not in ("", STDOUT) and _same_file(p, Path(src)):
            raise UserError(field, f"{str(p)!r} is the {option} file this command reads; give another path")
    check_output_dir(p.parent if str(p.parent) else Path("."), field)
    return p


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (hard and symbolic links included); a path that does not exist names no
    file another one reads."""
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def atomic_write_bytes(path: str | Path, data: bytes, field: str = "out") -> Path:
    """Write `data` to `path` through a temporary file in its folder and a rename (`-`: to stdout).

    Refuses (UserError naming `field`) a target that is not a regular file, and turns a failure to
    create or write the file into a UserError: nothing is left half-written either way."""
    if str(path) == STDOUT:
        if hasattr(sys.stdout, "buffer"):
            sys.stdout.buffer.write(data)
        else:  # a text-only stream (tests capture stdout in a StringIO)
            sys.stdout.write(data.decode("utf-8"))
        sys.stdout.flush()
        return Path(STDOUT)
    return atomic_write_with(path, lambda tmp: Path(tmp).write_bytes(data), field)


def atomic_write_text(path: str | Path, text: str, field: str = "out") -> Path:
    """`atomic_write_bytes` of UTF-8 text."""
    return atomic_write_bytes(path, text.encode("utf-8"), field)


def atomic_write_with(path: str | Path, write: Callable[[str], object], field: str = "out") -> Path:
    """Like `atomic_write_bytes`, for writers that need a file name (`write(tmp_path)`, e.g. parquet)."""
    path = check_path(path, field)
    _refuse_special(path, field)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as e:
        raise UserError(field, f"cannot write {str(path)!r}: {e.strerror or e}") from None
    try:
        write(tmp)
        os.chmod(tmp, FILE_MODE)
        _refuse_special(path, field)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise UserError(field, f"cannot write {str(path)!r}: {e.strerror or e}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
