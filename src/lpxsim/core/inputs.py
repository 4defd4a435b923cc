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
TEXT_FILE_MAX_BYTES = 64 * 1024**2  # config.json / YAML files: a few KB in practice
TRACE_FILE_MAX_BYTES = 4 * 1024**3


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


_HUMAN = re.compile(r"^([0-9][0-9_,]*\.?[0-9]*(?:e[+-]?[0-9]+)?)\s*(k|ki|m|mi|g|gi)?$")
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
    num = float(m.group(1).replace("_", "").replace(",", ""))
    value = num * _SCALE[m.group(2) or None]
    if not math.isfinite(value) or not float(value).is_integer():
        if math.isfinite(value) and abs(value - round(value)) < 1e-6 * max(1.0, abs(value)):
            value = round(value)
        else:
            raise UserError(field, f"expected a whole number in {range_text(lo, hi)}, got {text!r}")
    return check_int(field, int(value), lo, hi)


def parse_count_list(text: str, field: str, lo: int, hi: int, max_items: int = 1_000) -> list[int]:
    """'10000,100K,1m' -> [10000, 100000, 1000000]; each in [lo, hi]."""
    values = [parse_count(p, field, lo, hi) for p in str(text).split(",") if p.strip()]
    if not values:
        raise UserError(field, f"expected at least one value in {range_text(lo, hi)}")
    if len(values) > max_items:
        raise UserError(field, f"expected at most {max_items:,} values, got {len(values):,}")
    return values


def read_text(path: str | Path, field: str, max_bytes: int = TEXT_FILE_MAX_BYTES) -> str:
    """A UTF-8 text file's contents, or a one-line UserError (missing, a folder, too big, binary)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(field, f"no such file {str(p)!r}")
    size = p.stat().st_size
    if size > max_bytes:
        raise UserError(field, f"{p.name} is {size:,} bytes; expected a text file of at most {max_bytes:,} bytes")
    data = p.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UserError(field, f"{p.name} is not UTF-8 text (byte {e.start}); expected a text file") from None
    if "\x00" in text:
        raise UserError(field, f"{p.name} contains NUL bytes; expected a text file")
    return text


def check_output_dir(path: str | Path, field: str = "out") -> Path:
    """An output folder that exists or can be created: checked before any work starts."""
    p = Path(path)
    for parent in (p, *p.parents):
        if parent.exists():
            if not parent.is_dir():
                what = "" if parent == p else f" ({str(parent)!r} is a file)"
                raise UserError(field, f"{str(p)!r} is not a directory{what}")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise UserError(field, f"cannot write into {str(parent)!r}")
            return p
    return p


def check_output_file(path: str | Path, field: str) -> Path:
    """An output file whose folder exists or can be created and which is not itself a folder."""
    p = Path(path)
    if p.is_dir():
        raise UserError(field, f"{str(p)!r} is a directory; expected a file path")
    check_output_dir(p.parent if str(p.parent) else Path("."), field)
    return p


def check_jobs(jobs: object, field: str = "jobs") -> int:
    """Worker processes: 1 .. 4 x CPU cores."""
    return check_int(field, jobs, 1, jobs_max())
