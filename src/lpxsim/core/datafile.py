"""Shipped YAML data files (the catalog's systems, costs.yaml), read through a JSON memo.

Importing PyYAML and parsing two files is ~25 ms of a warm `lpxsim estimate` (~0.2 s CPU in all). The
parsed content of a file is kept as JSON in the cache folder (`lpxsim.core.cache.write_memo`) under a
signature of the file's path and stat (size, mtime, ctime, inode): an edited or replaced file has a new
signature and is parsed again. Only content that JSON gives back unchanged is kept (YAML dates,
non-string keys or NaN are parsed every time). `--no-cache` reads and writes no memo.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lpxsim.core.cache import read_memo, stat_signature, write_memo


def read_yaml(path: str | Path) -> Any:
    """The parsed YAML of `path` (libyaml's safe loader when built), from the memo when the file is unchanged."""
    path = Path(path)
    sig = stat_signature([(str(path.resolve()), path.stat())])
    text = read_memo("yaml", sig)
    if text is not None:
        try:
            return json.loads(text)
        except ValueError:
            pass  # a damaged memo: parse the file again (and rewrite the memo)
    import yaml  # here: a warm process never needs it

    raw = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    try:
        text = json.dumps(raw, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return raw  # not JSON (a date, a NaN): no memo
    if json.loads(text) == raw:  # e.g. an int key would come back a string: then no memo
        write_memo("yaml", sig, text)
    return raw
