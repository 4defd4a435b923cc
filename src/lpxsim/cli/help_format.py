"""--help without a `<bool>` type next to plain flags (--json, --help): a flag takes no value."""

from __future__ import annotations

from typer.core import TyperOption

_installed = False


def install() -> None:
    """Make typer's rich help print no type for boolean flags (idempotent)."""
    global _installed
    if _installed:
        return
    original = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx) -> str | None:  # type: ignore[no-untyped-def]
        if self.is_flag and self.metavar is None:
            return None
        return original(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
    _installed = True
