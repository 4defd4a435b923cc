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
