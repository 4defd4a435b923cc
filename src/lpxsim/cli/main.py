"""Entry point: builds the typer app from the command modules and maps user errors to exit 2."""

from __future__ import annotations

import functools
import importlib
import sys

import typer

from lpxsim.cli import help_format
from lpxsim.errors import UserError

help_format.install()

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
]

for _mod in COMMAND_MODULES:
    importlib.import_module(_mod).register(app)  # a missing module is a packaging bug: fail loudly


def _one_line(e: Exception) -> str:
    """A click usage error as one line; a bad option value reads like a UserError: `field: message`."""
    param = getattr(e, "param", None)  # typer vendors click: duck-type its BadParameter
    if type(e).__name__ == "BadParameter" and param is not None and getattr(param, "opts", None):
        return f"{param.opts[0].lstrip('-')}: {e.message}"
    return e.format_message()


@functools.cache
def command():  # -> the click command of `app`
    """The click command tree, built once per process (typer rebuilds it on every `app()` call)."""
    return typer.main.get_command(app)


def run() -> None:
    """Console-script entry: user mistakes are one line on stderr and exit code 2."""
    try:
        rv = command().main(args=sys.argv[1:], prog_name="lpxsim", standalone_mode=False)
        if isinstance(rv, int) and rv:  # click returns a typer.Exit's code instead of raising it
            sys.exit(rv)
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
            message = _one_line(e)
            if not message:  # a group called bare (`lpxsim plan`) printed its help: not an error
                sys.exit(0)
            sys.stderr.write(f"error: {message}\n")
            sys.exit(e.exit_code)
        raise


if __name__ == "__main__":
    run()
