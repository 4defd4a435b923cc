"""Entry point: builds the typer app from the command modules and maps user errors to exit 2."""

from __future__ import annotations

import importlib
import sys

import typer

from lpxsim.errors import UserError

app = typer.Typer(
    name="lpxsim",
    help="Digital twin of the NVIDIA Groq 3 LPX rack and heterogeneous Vera Rubin + LPX serving.\n\n"
    "Per-user tok/s is always printed with its context length, concurrency and hardware.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines `register(app)`. Order is the order of `lpxsim --help`.
COMMAND_MODULES = [
    "lpxsim.cli.catalog_cmds",
    "lpxsim.cli.capacity_cmd",
]

for _mod in COMMAND_MODULES:
    importlib.import_module(_mod).register(app)


def run() -> None:
    """Console-script entry: user mistakes are one line on stderr and exit code 2."""
    try:
        app(standalone_mode=False)
    except UserError as e:
        sys.stderr.write(f"error: {e}\n")
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        sys.exit(130)
    except Exception as e:  # click usage errors carry their own exit code
        import click

        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(2 if e.exit_code == 2 else e.exit_code)
        raise


if __name__ == "__main__":
    run()
