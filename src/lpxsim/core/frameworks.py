"""The GPU serving engines lpxsim has parameters for, and their accepted aliases.

A light module (no numpy, no backend) so that the CLI and the engine can check a `--framework` before any work;
`lpxsim.gpu.engine` holds each engine's parameters under these names.
"""

from __future__ import annotations

from lpxsim.core.errors import UserError

FRAMEWORKS = ("sglang", "trtllm", "vllm")
ALIASES = {"trt": "trtllm", "trt-llm": "trtllm", "tensorrt-llm": "trtllm", "sgl": "sglang"}


def canonical(name: str) -> str | None:
    """The engine `name` means (an alias resolved, any case), or None when lpxsim has no parameters for it."""
    key = ALIASES.get(name.lower(), name.lower())
    return key if key in FRAMEWORKS else None


def framework_name(name: str) -> str:
    """Canonical framework name; UserError naming `framework` if unknown."""
    key = canonical(name)
    if key is None:
        raise UserError("framework", f"unknown framework {name!r}; choose one of {', '.join(FRAMEWORKS)}")
    return key

# The engine release whose fitted host time a GPU step carries (gpu.engine.engine_params): the latest fitted one
# (every answer), or the fit over every release (a measured run whose software date is unknown)
LATEST = "latest"
POOLED = "pooled"


def release_name(text: str, field: str = "engine_release") -> str:
    """A release as the engine parameters take it: LATEST, POOLED, or a date "YYYY-MM" / "YYYY-MM-DD" (the release
    in effect then; a time after the day, as a spreadsheet writes one, is dropped); UserError naming `field`
    otherwise."""
    value = str(text).strip()
    if value.lower() in (LATEST, POOLED):
        return value.lower()
    if len(value) > 10 and value[10] in "T ":
        value = value[:10]
    parts = value.split("-")
    if (len(parts) in (2, 3) and len(parts[0]) == 4 and all(len(p) == 2 for p in parts[1:])
            and all(p.isdigit() for p in parts) and _is_date(*(int(p) for p in parts))):
        return value
    raise UserError(field, f"expected latest, pooled or a date YYYY-MM or YYYY-MM-DD, got {text!r}")


def _is_date(year: int, month: int, day: int = 1) -> bool:
    """Whether the calendar has this day (2026-02-30 and 2026-13 it has not)."""
    import datetime

    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    return True
