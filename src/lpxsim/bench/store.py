"""A results directory a sweep appends to atomically: one JSON file per finished point.

Each point is written to a temporary name and renamed, so a file is either absent or complete. An
interrupted sweep rerun with the same directory finds what it already wrote and computes only the
rest. A point file that does not read back as that point (garbage, a truncated copy, another point's
content, the wrong types) counts as missing: the point is computed again and the file rewritten.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd

from lpxsim.core import outputs
from lpxsim.core.errors import UserError

POINT_FILE_MAX_BYTES = 1024**2  # a point is a few hundred bytes: anything far larger is not one


def point_key(params: dict[str, Any]) -> str:
    """A stable file name for a point: hash of its parameters in canonical JSON."""
    blob = json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def atomic_write_bytes(path: Path, data: bytes, field: str = "out") -> None:
    """Write `data` to `path` via a temporary file in the same directory and a rename
    (`lpxsim.core.outputs`: never over a device, a FIFO or a folder; a failure is a UserError)."""
    outputs.atomic_write_bytes(path, data, field)


def atomic_write_text(path: Path, text: str, field: str = "out") -> None:
    outputs.atomic_write_text(path, text, field)


def atomic_write_parquet(path: Path, df: pd.DataFrame, field: str = "out") -> None:
    """Parquet written under a temporary name in the target directory, then renamed."""
    outputs.atomic_write_with(path, lambda tmp: df.to_parquet(tmp, index=False), field)


def _canonical_params(params: dict[str, Any]) -> Any:
    return json.loads(json.dumps(params, sort_keys=True, default=_jsonable))


class PointStore:
    """The per-point files of one sweep under `root/points/`."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.dir = self.root / "points"

    def path(self, params: dict[str, Any]) -> Path:
        return self.dir / f"{point_key(params)}.json"

    def _read(self, path: Path) -> dict[str, Any] | None:
        """The {params, row} record of a point file, or None when it is missing or not a valid record."""
        try:
            if path.stat().st_size > POINT_FILE_MAX_BYTES:
                return None
            record = json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError):  # missing, garbage, not UTF-8, absurd nesting
            return None
        if not (isinstance(record, dict) and isinstance(record.get("params"), dict)
                and isinstance(record.get("row"), dict)):
            return None
        return record

    def record(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The stored record of this point, or None (missing, corrupt, or another point's content)."""
        record = self._read(self.path(params))
        if record is None or record["params"] != _canonical_params(params):
            return None
        return record

    def has(self, params: dict[str, Any]) -> bool:
        """Whether a valid record of this point is stored (a corrupt one is recomputed)."""
        return self.record(params) is not None

    def load(self, params: dict[str, Any]) -> dict[str, Any]:
        record = self.record(params)
        if record is None:
            raise UserError("out", f"{self.path(params)} is missing or not a valid sweep point; run the sweep again")
        return record

    def save(self, params: dict[str, Any], row: dict[str, Any]) -> None:
        """Record one finished point: its parameters and its result row (a damaged file is replaced)."""
        path = self.path(params)
        try:
            if path.is_dir() or (path.exists() and not path.is_file()):
                raise UserError("out", f"{path} is not a regular file; remove it and run the sweep again")
        except OSError as e:
            raise UserError("out", f"cannot use {path}: {e.strerror or e}") from None
        from lpxsim.core.outputs import mark_output_dir

        mark_output_dir(self.root)  # the sweep's folder is lpxsim's from its first point (`claim_output_dir`)
        atomic_write_text(path, json.dumps({"params": params, "row": row}, sort_keys=True, default=_jsonable))

    def rows(self) -> list[dict[str, Any]]:
        """Every valid point file's row (order: by file name; callers sort); corrupt files are skipped."""
        if not self.dir.is_dir():
            return []
        records = (self._read(p) for p in sorted(self.dir.glob("*.json")))
        return [r["row"] for r in records if r is not None]


def _jsonable(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return str(v)
