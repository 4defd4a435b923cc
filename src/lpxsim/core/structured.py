"""JSON and YAML input files parsed under caps: size, nesting depth, node count, integer length.

Every user file of structured data (config.json, fleet / workload / demand / costs YAML, trace JSONL
lines) is parsed here, so a hostile or broken file is one UserError naming the field, never a
RecursionError, a ValueError from Python's integer-digit limit, or a walk that never ends:

- the text is capped in bytes and must be UTF-8 (`lpxsim.core.inputs.read_text`);
- nesting deeper than `DEPTH_MAX` is refused (the parsers themselves stop near 1,000 levels with a
  RecursionError or a scanner error; anything deeper than `DEPTH_MAX` is refused after the parse, before
  pydantic or the config parser recurse into it);
- more than `NODES_MAX` values (YAML aliases can make a small file expand into billions) is refused;
- an integer literal longer than Python's digit limit (4,300 digits) is refused.

The caps are listed in docs/cli.md ("Files").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lpxsim.core.errors import UserError

DEPTH_MAX = 32  # nested lists/mappings: real configs and YAML files use fewer than 8 levels
NODES_MAX = 1_000_000  # values in one document (after YAML aliases are expanded)


def check_shape(obj: Any, field: str, name: str) -> Any:
    """`obj` when its nesting is at most DEPTH_MAX and it holds at most NODES_MAX values, else a UserError.

    Iterative (no recursion) and bounded by NODES_MAX steps, so it is safe on any parsed document,
    including YAML alias graphs that share one list many times."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > NODES_MAX:
            raise UserError(field, f"{name} holds more than {NODES_MAX:,} values; expected a small data file")
        if isinstance(node, dict):
            children = list(node.values()) + list(node.keys())
        elif isinstance(node, (list, tuple)):
            children = list(node)
        else:
            continue
        if depth >= DEPTH_MAX and children and any(isinstance(c, (dict, list, tuple)) for c in children):
            raise UserError(field, f"{name} is nested more than {DEPTH_MAX} levels deep")
        stack.extend((c, depth + 1) for c in children)
    return obj


def _too_deep(field: str, name: str) -> UserError:
    return UserError(field, f"{name} is nested more than {DEPTH_MAX} levels deep")


def loads_json(text: str, field: str, name: str) -> Any:
    """Parse JSON text under the caps (depth, values, integer digits), or a one-line UserError."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(field, f"{name} is not valid JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise _too_deep(field, name) from None
    except ValueError as e:  # Python's integer-digit limit: "Exceeds the limit (4300 digits) ..."
        raise UserError(field, f"{name} holds a number too long to read ({str(e).split(':')[0]})") from None
    return check_shape(doc, field, name)


def loads_yaml(text: str, field: str, name: str) -> Any:
    """Parse YAML text (libyaml's safe loader when built) under the caps, or a one-line UserError."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        doc = yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or ""
        why = f" ({problem})" if "nesting" in problem else ""
        raise UserError(field, f"{name} is not valid YAML{where}{why}") from None
    except RecursionError:
        raise _too_deep(field, name) from None
    except (ValueError, OverflowError) as e:  # an integer past the digit limit, a float past its range
        raise UserError(field, f"{name} holds a value that cannot be read ({str(e).split(':')[0]})") from None
    return check_shape(doc, field, name)


def read_json(path: str | Path, field: str) -> Any:
    """A JSON file's document, through every cap (size, UTF-8, depth, values, digits)."""
    from lpxsim.core.inputs import read_text

    p = Path(path)
    return loads_json(read_text(p, field), field, p.name)


def read_yaml(path: str | Path, field: str) -> Any:
    """A YAML file's document, through every cap (size, UTF-8, depth, values, digits)."""
    from lpxsim.core.inputs import read_text

    p = Path(path)
    return loads_yaml(read_text(p, field), field, p.name)
