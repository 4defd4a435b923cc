"""Entry point: builds the typer app from the command modules and maps user errors to exit 2.

Start-up imports only the module of the command being run (`COMMAND_NAMES`), so
`lpxsim estimate` never pays for pandas or the serving simulator; `--help`, an
unknown name, or `app` imported by a test registers every module.
"""

from __future__ import annotations

import atexit
import errno
import functools
import gc
import importlib
import sys
from contextlib import nullcontext

import typer

from lpxsim.cli import help_format
from lpxsim.core.errors import UserError

help_format.install()

_app = typer.Typer(
    name="lpxsim",
    help="Digital twin of the NVIDIA Groq 3 LPX rack and heterogeneous Vera Rubin + LPX serving.\n\n"
    "Per-user tok/s is always printed with its context length, concurrency and hardware.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
)


def version_text() -> str:
    """`lpxsim X.Y.Z` (the installed distribution's version, else the package's)."""
    from importlib import metadata

    try:
        version = metadata.version("lpxsim")
    except metadata.PackageNotFoundError:  # run from a source tree without installing
        from lpxsim import __version__ as version
    return f"lpxsim {version}"


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(version_text() + "\n")
        raise typer.Exit(0)


@_app.callback()
def _main(
    no_cache: bool = typer.Option(False, "--no-cache", help="bypass the on-disk step-cost cache ($LPXSIM_CACHE)"),
    version: bool = typer.Option(False, "--version", help="print the version and exit", is_eager=True,
                                 callback=_print_version),
) -> None:
    """lpxsim: tokens/s per user at a stated context and concurrency, next to the hardware and its power."""
    if no_cache:
        from lpxsim.core.cache import set_enabled

        set_enabled(False)


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
    "lpxsim.cli.cache_cmd",
    "lpxsim.cli.modes_cmd",
    "lpxsim.cli.validate_cmd",
    "lpxsim.cli.serve_cmd",
]

# The module that registers each command: `lpxsim NAME` imports only that one. A command missing here
# still works (every module is then registered); this map only makes start-up faster.
COMMAND_NAMES = {
    "models": "lpxsim.cli.catalog_cmds", "model": "lpxsim.cli.catalog_cmds",
    "systems": "lpxsim.cli.catalog_cmds", "system": "lpxsim.cli.catalog_cmds",
    "capacity": "lpxsim.cli.capacity_cmd", "compile": "lpxsim.cli.compile_cmd",
    "estimate": "lpxsim.cli.estimate_cmd", "emulate": "lpxsim.cli.emulate_cmd",
    "simulate": "lpxsim.cli.simulate_cmd", "bench": "lpxsim.cli.bench_cmd", "sweep": "lpxsim.cli.sweep_cmd",
    "tour": "lpxsim.cli.tour_cmd", "plan": "lpxsim.cli.plan_cmd", "cache": "lpxsim.cli.cache_cmd",
    "modes": "lpxsim.cli.modes_cmd", "validate": "lpxsim.cli.validate_cmd", "serve": "lpxsim.cli.serve_cmd",
}
# Commands that answer in well under 2 s: no whole-command spinner (every other one shows one at a terminal).
QUICK_COMMANDS = {"models", "model", "systems", "system", "cache", "capacity", "serve"}  # serve: no spinner
_registered: set[str] = set()


def _register(modules: list[str]) -> typer.Typer:
    """Register `modules` (in `COMMAND_MODULES` order, so --help lists commands in that order)."""
    for mod in COMMAND_MODULES:
        if mod in modules and mod not in _registered:
            importlib.import_module(mod).register(_app)  # a missing module is a packaging bug: fail loudly
            _registered.add(mod)
    return _app


def _invoked(argv: list[str]) -> str | None:
    """The command name on a command line (the first word that is not a root option), if any."""
    for a in argv:
        if not a.startswith("-"):
            return a
        if a in ("--help", "-h"):
            return None
    return None


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # `from lpxsim.cli.main import app`: the whole CLI
        return _register(COMMAND_MODULES)
    raise AttributeError(name)


def _one_line(e: Exception) -> str:
    """A click usage error as one line; a bad option value reads like a UserError: `field: message`."""
    param = getattr(e, "param", None)  # typer vendors click: duck-type its BadParameter
    if type(e).__name__ == "BadParameter" and param is not None and getattr(param, "opts", None):
        return f"{param.opts[0].lstrip('-')}: {e.message}"
    return e.format_message()


def command():  # -> the click command of the commands registered so far
    """The click command tree, built once per set of registered commands (typer rebuilds it on every
    `app()` call, which costs ~30 ms a call in the in-process fuzz suite)."""
    return _command(frozenset(_registered))


@functools.cache
def _command(registered: frozenset[str]):
    return typer.main.get_command(_app)


def _quick_gc() -> None:
    """Garbage-collector settings for a short CLI process (measured: about a quarter of a cold GPU
    `estimate`'s CPU). Start-up allocates tens of thousands of long-lived objects (imports, pydantic
    schemas, the catalog) and a collection every 700 allocations re-walks them for nothing: collect
    every 10,000. At exit nothing needs collecting: freezing every object first spares the
    interpreter's final full collections. Neither changes a result."""
    global _gc_tuned
    if _gc_tuned:
        return
    _gc_tuned = True
    gc.set_threshold(10_000, 10, 10)
    atexit.register(gc.freeze)  # registered first, so it runs after every other exit handler


_gc_tuned = False


def run() -> None:
    """Console-script entry: user mistakes are one line on stderr and exit code 2."""
    _quick_gc()
    argv = sys.argv[1:]
    if argv == ["--version"]:  # answered before any command module is imported
        sys.stdout.write(version_text() + "\n")
        sys.exit(0)
    if "--no-cache" in argv[1:]:  # also accepted after the command name
        argv = ["--no-cache", *(a for a in argv if a != "--no-cache")]
    name = _invoked(argv) or ""
    mod = COMMAND_NAMES.get(name)
    _register([mod] if mod else COMMAND_MODULES)
    from lpxsim.core import progress

    try:
        # --json: stdout belongs to one JSON object, so no bars anywhere (worker processes included)
        with progress.silenced("--json" in argv), (
                progress.bar(f"lpxsim {name}", line=False) if mod and name not in QUICK_COMMANDS else nullcontext()):
            rv = command().main(args=argv, prog_name="lpxsim", standalone_mode=False)
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
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            raise
        # a path check missed somewhere: still one line (the checked paths name their option)
        sys.stderr.write(f"error: path: file name too long: {str(e.filename)[:60]!r}...\n")
        sys.exit(2)
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
