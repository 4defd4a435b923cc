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


@app.callback()
def _main() -> None:
    """lpxsim: tokens/s per user at a stated context and concurrency, next to the hardware and its power."""


# Each module defines `register(app)`. Order is the order of `lpxsim --help`.
COMMAND_MODULES = [
    "lpxsim.cli.catalog_cmds",
    "lpxsim.cli.capacity_cmd",
    "lpxsim.cli.compile_cmd",
    "lpxsim.cli.estimate_cmd",
    "lpxsim.cli.emulate_cmd",
    "lpxsim.cli.simulate_cmd",
    "lpxsim.cli.bench_cmd",
    "lpxsim.cli.sweep_cmd",
    "lpxsim.cli.tour_cmd",
    "lpxsim.cli.plan_cmd",
    "lpxsim.cli.modes_cmd",
]

for _mod in COMMAND_MODULES:
    importlib.import_module(_mod).register(app)  # a missing module is a packaging bug: fail loudly


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
    except Exception as e:
        # Click's usage errors (typer vendors click): one line, their own exit code (2).
        if hasattr(e, "show") and hasattr(e, "exit_code") and hasattr(e, "format_message"):
            sys.stderr.write(f"error: {e.format_message()}\n")
            sys.exit(e.exit_code)
        raise


if __name__ == "__main__":
    run()
