"""Checks at the edges: documented ranges for user numbers, human token counts, text files that decode.

Every user-facing number passes through `check_int` / `check_float` (finite, inside its range), so a
mistake is one UserError naming the field and its allowed range, never a hang, a MemoryError or a
traceback further in. The ranges are documented in docs/cli.md ("Input ranges (issue 15)").
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from lpxsim.core.errors import UserError

# Upper bounds: far above any real deployment, low enough that nothing downstream hangs or blows up.
TOKENS_MAX = 10_000_000  # context, ISL, OSL, prefix tokens
CONCURRENCY_MAX = 10_000_000  # concurrent users / streams / requests
LAYERS_MAX = 1_000  # num_hidden_layers of a config.json
CHIPS_MAX = 1_000_000  # chips or GPUs asked for
RACKS_MAX = 10_000.0
PARALLEL_MAX = 4_096  # tp, ep, pp degree
MTP_MAX = 32  # speculative draft length
SEED_MAX = 2**63 - 1
EMULATE_STEPS_MAX = 256  # `emulate --steps`: each step compiles one more program
TEXT_FILE_MAX_BYTES = 64 * 1024**2  # config.json / YAML / costs files: a few KB in practice
# Traces and prompt files, on disk and (gzip) after decompression: the public traces are tens of MB; a
# quarter GiB of CSV already takes pandas seconds, and a gzip bomb is stopped as it inflates past this.
TRACE_FILE_MAX_BYTES = 256 * 1024**2
PATH_MAX_BYTES = 4096  # Linux PATH_MAX


def jobs_max() -> int:
    """Most worker processes a command may start: 4 x the CPU cores."""
    return 4 * (os.cpu_count() or 1)


def _fmt(v: float) -> str:
    """Compact form of a bound: 10M, 1,000, 0.5."""
    if isinstance(v, (int, float)) and v >= 1e9 and v == float(f"{v:.0e}"):
        return f"{v:.0e}".replace("e+0", "e").replace("e+", "e")  # 1e9, 1e12
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e18):
        v = int(v)
        for suffix, scale in (("M", 1_000_000), ("K", 1_000)):
            if v >= scale and v % scale == 0 and v >= 10_000:
                return f"{v // scale:,}{suffix}"
        return f"{v:,}"
    return f"{v:g}"


def range_text(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> str:
    """'1..10M', '>0..1' or '0..<1' for messages and --help."""
    return f"{'>' if lo_open else ''}{_fmt(lo)}..{'<' if hi_open else ''}{_fmt(hi)}"


def check_int(field: str, value: object, lo: int, hi: int) -> int:
    """`value` as an int in [lo, hi], or a UserError naming `field` and the range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(field, f"expected an integer in {range_text(lo, hi)}, got {value!r}")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise UserError(field, f"expected an integer in {range_text(lo, hi)}, got {value!r}")
    if not lo <= value <= hi:
        raise UserError(field, f"expected an integer in {range_text(lo, hi)}, got {int(value):,}")
    return int(value)


def check_float(field: str, value: object, lo: float, hi: float, lo_open: bool = False,
                hi_open: bool = False) -> float:
    """`value` as a finite float in [lo, hi] (ends open with `lo_open` / `hi_open`), or a UserError."""
    rng = range_text(lo, hi, lo_open, hi_open)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(field, f"expected a number in {rng}, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v > hi or v < lo or (lo_open and v <= lo) or (hi_open and v >= hi):
        raise UserError(field, f"expected a finite number in {rng}, got {value!r}")
    return v


# A comma only as a thousands separator (100,000): `--concurrency 1,2,4` on a one-value option is a mistake, not 124.
_HUMAN = re.compile(r"^((?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9][0-9_]*)(?:\.[0-9]*)?(?:e[+-]?[0-9]+)?)\s*(k|ki|m|mi|g|gi)?$")
_SCALE = {None: 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000, "ki": 1024, "mi": 1024**2, "gi": 1024**3}


def parse_count(text: object, field: str, lo: int, hi: int, human: bool = True) -> int:
    """A whole count written the human way: 32000, 32K, 100k, 1M, 1.5m, 32Ki (=32768), 1e5; in [lo, hi].

    K, M, G are powers of 1,000 (token counts are quoted that way: a "100K context" is 100,000 tokens);
    Ki, Mi, Gi powers of 1,024. With `human=False` only plain integers are accepted (seeds, degrees)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return check_int(field, text, lo, hi)
    s = str(text).strip().lower()
    m = _HUMAN.match(s) if human else re.match(r"^([0-9][0-9_]*)()$", s)
    if not m:
        example = " (e.g. 32000, 32K, 1M)" if human else ""
        raise UserError(field, f"expected a whole number in {range_text(lo, hi)}{example}, got {text!r}")
    digits = m.group(1).replace("_", "").replace(",", "")
    if digits.isdigit() and len(digits) <= 30:  # a plain integer: exact (a float would round 2^63 - 1)
        return check_int(field, int(digits) * _SCALE[m.group(2) or None], lo, hi)
    num = float(digits)
    value = num * _SCALE[m.group(2) or None]
    if not math.isfinite(value) or not float(value).is_integer():
        if math.isfinite(value) and abs(value - round(value)) < 1e-6 * max(1.0, abs(value)):
            value = round(value)
        else:
            raise UserError(field, f"expected a whole number in {range_text(lo, hi)}, got {text!r}")
    return check_int(field, int(value), lo, hi)


def parse_count_list(text: str, field: str, lo: int, hi: int, max_items: int = 1_000) -> list[int]:
    """'10000,100K,1m' -> [10000, 100000, 1000000]; each in [lo, hi], each once (a value given twice, as
    '32K,32000', asks one question: the first place it appears keeps it)."""
    values = list(dict.fromkeys(parse_count(p, field, lo, hi) for p in str(text).split(",") if p.strip()))
    if not values:
        raise UserError(field, f"expected at least one value in {range_text(lo, hi)}")
    if len(values) > max_items:
        raise UserError(field, f"expected at most {max_items:,} values, got {len(values):,}")
    return values


def name_max(folder: str | Path = ".") -> int:
    """The longest file name the file system of `folder` takes (NAME_MAX, 255 bytes on Linux)."""
    for d in (Path(folder), *Path(folder).parents):
        try:
            return int(os.pathconf(d, "PC_NAME_MAX"))
        except (OSError, ValueError):
            continue
    return 255


def check_path(path: str | Path, field: str) -> Path:
    """`path` as a Path, or a UserError when it is empty, holds a NUL, or a component or the whole path is
    longer than the file system allows (the OS would raise ENAMETOOLONG from deep inside a command)."""
    text = os.fspath(path)
    if not str(text).strip():
        raise UserError(field, "expected a file path, got ''")
    if "\x00" in str(text):
        raise UserError(field, "file path contains a NUL byte")
    raw = os.fsencode(text)
    if len(raw) > PATH_MAX_BYTES:
        raise UserError(field, f"file path is {len(raw):,} bytes; the limit is {PATH_MAX_BYTES:,}")
    limit = name_max(Path(text).parent)
    for part in raw.split(b"/"):
        if len(part) > limit:
            shown = os.fsdecode(part[:24]) + "..."
            raise UserError(field, f"file name {shown!r} is {len(part):,} bytes; the limit is {limit}")
    return Path(text)


def is_file(path: str | Path) -> bool:
    """`Path.is_file` that is False (not an OSError) for a name too long, a NUL or a path of a
    non-folder: the caller then says "no such file" naming its field."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def read_text(path: str | Path, field: str, max_bytes: int = TEXT_FILE_MAX_BYTES) -> str:
    """A UTF-8 text file's contents, or a one-line UserError (missing, a folder, too big, binary)."""
    p = check_path(path, field)
    if not is_file(p):
        raise UserError(field, f"no such file {str(p)!r}")
    data = read_bytes(p, field, max_bytes)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UserError(field, f"{p.name} is not UTF-8 text (byte {e.start}); expected a text file") from None
    if "\x00" in text:
        raise UserError(field, f"{p.name} contains NUL bytes; expected a text file")
    return text


def read_bytes(path: str | Path, field: str, max_bytes: int) -> bytes:
    """A file's bytes, at most `max_bytes` of them, or a UserError. A `.gz` file is decompressed, and
    the cap applies to the decompressed bytes (read in blocks: a gzip bomb stops at the cap)."""
    p = check_path(path, field)
    too_big = f"{p.name} is over {max_bytes:,} bytes" + (" when decompressed" if p.suffix == ".gz" else "")
    try:
        if p.stat().st_size > max_bytes and p.suffix != ".gz":
            raise UserError(field, f"{too_big}; expected at most {max_bytes:,}")
        if p.suffix == ".gz":
            import gzip
            import zlib

            try:
                with gzip.open(p, "rb") as f:
                    data = f.read(max_bytes + 1)
            except (EOFError, zlib.error, gzip.BadGzipFile) as e:
                raise UserError(field, f"{p.name} cannot be read: not a valid gzip stream ({e})") from None
        else:
            with open(p, "rb") as f:
                data = f.read(max_bytes + 1)
    except OSError as e:
        raise UserError(field, f"cannot read {p.name}: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise UserError(field, f"{too_big}; expected at most {max_bytes:,}")
    return data


def check_output_dir(path: str | Path, field: str = "out") -> Path:
    """An output folder that exists or can be created: checked before any work starts
    (`lpxsim.core.outputs.check_output_dir`)."""
    from lpxsim.core.outputs import check_output_dir as check

    return check(path, field)


def claim_output_dir(path: str | Path, field: str = "out") -> Path:
    """A results folder that is new, empty or lpxsim's own (`lpxsim.core.outputs.claim_output_dir`)."""
    from lpxsim.core.outputs import claim_output_dir as claim

    return claim(path, field)


def check_output_file(path: str | Path, field: str, allow_stdout: bool = False,
                      reads: dict[str, str | Path | None] | None = None) -> Path:
    """An output file path that can be written and is none of the files the command reads (`reads`: option ->
    path; `lpxsim.core.outputs.check_output_file`)."""
    from lpxsim.core.outputs import check_output_file as check

    return check(path, field, allow_stdout, reads)


def check_jobs(jobs: object, field: str = "jobs") -> int:
    """Worker processes: 1 .. 4 x CPU cores."""
    return check_int(field, jobs, 1, jobs_max())
