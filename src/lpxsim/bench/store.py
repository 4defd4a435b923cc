"""A results directory a sweep appends to atomically: one JSON file per finished point.

Each point is written to a temporary name and renamed, so a file is either
absent or complete. An interrupted sweep rerun with the same directory finds
what it already wrote and computes only the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

_UMASK = os.umask(0)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK  # what open() would have given; mkstemp alone gives 0600


def point_key(params: dict[str, Any]) -> str:
    """A stable file name for a point: hash of its parameters in canonical JSON."""
    blob = json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_parquet(path: Path, df: pd.DataFrame) -> None:
    """Parquet written under a temporary name in the target directory, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        df.to_parquet(tmp, index=False)
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class PointStore:
    """The per-point files of one sweep under `root/points/`."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.dir = self.root / "points"

    def path(self, params: dict[str, Any]) -> Path:
        return self.dir / f"{point_key(params)}.json"

    def has(self, params: dict[str, Any]) -> bool:
        return self.path(params).is_file()

    def load(self, params: dict[str, Any]) -> dict[str, Any]:
        return json.loads(self.path(params).read_text())

    def save(self, params: dict[str, Any], row: dict[str, Any]) -> None:
        """Record one finished point: its parameters and its result row."""
        atomic_write_text(self.path(params), json.dumps({"params": params, "row": row}, sort_keys=True,
                                                        default=_jsonable))

    def rows(self) -> list[dict[str, Any]]:
        """Every finished point's row (order: by file name; callers sort)."""
        if not self.dir.is_dir():
            return []
        return [json.loads(p.read_text())["row"] for p in sorted(self.dir.glob("*.json"))]


def _jsonable(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return str(v)
