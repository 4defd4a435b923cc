"""Typer options that check their value at the edge: human counts (32K, 1M), finite numbers in a range.

Each factory returns a `typer.Option` whose parser rejects a bad value with one line naming the option
and its allowed range (click renders it as "Invalid value for '--context': expected ..."), and whose
--help states the range. The ranges themselves live in `lpxsim.core.inputs`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from lpxsim.core import inputs
from lpxsim.core.errors import UserError
from lpxsim.core.frameworks import LATEST, framework_name, release_name


def _parser(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        if value is None:
            return None
        try:
            return fn(value)
        except UserError as e:
            raise typer.BadParameter(e.message) from None

    return parse


def _float(text: Any) -> float:
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    try:
        return float(str(text).replace("_", ""))
    except ValueError:
        raise UserError("value", f"expected a number, got {text!r}") from None


def count_option(default: Any, *decls: str, help: str, lo: int = 1, hi: int = inputs.CONCURRENCY_MAX,
                 metavar: str = "N", human: bool = True) -> Any:
    """A whole number in [lo, hi]; with `human`, 32K / 100k / 1M are accepted too."""
    rng = inputs.range_text(lo, hi)
    field = decls[0].lstrip("-") if decls else "value"
    return typer.Option(default, *decls, metavar=metavar, help=f"{help} [{rng}{'; 32K, 1M ok' if human else ''}]",
                        parser=_parser(lambda v: inputs.parse_count(v, field, lo, hi, human)))


def tokens_option(default: Any, *decls: str, help: str, lo: int = 1, hi: int = inputs.TOKENS_MAX) -> Any:
    """A token count (context, ISL, OSL) in [lo, hi]: 32000, 32K, 100k, 1M."""
    return count_option(default, *decls, help=help, lo=lo, hi=hi, metavar="TOKENS")


def real_option(default: Any, *decls: str, help: str, lo: float, hi: float, lo_open: bool = False,
                hi_open: bool = False, metavar: str = "X") -> Any:
    """A finite number in [lo, hi] (open ends with `lo_open` / `hi_open`); NaN and inf are refused."""
    rng = inputs.range_text(lo, hi, lo_open, hi_open)
    field = decls[0].lstrip("-") if decls else "value"
    return typer.Option(default, *decls, metavar=metavar, help=f"{help} [{rng}]",
                        parser=_parser(lambda v: inputs.check_float(field, _float(v), lo, hi, lo_open, hi_open)))


def seed_option(default: int = 0, help: str = "random seed (same seed, same results)") -> Any:
    """A seed: a whole number >= 0."""
    return count_option(default, "--seed", help=help, lo=0, hi=inputs.SEED_MAX, human=False)


def jobs_option(default: Any, *decls: str, help: str) -> Any:
    """Worker processes: 1 .. 4 x CPU cores."""
    return count_option(default, *decls, help=help, lo=1, hi=inputs.jobs_max(), human=False)


def path_option(default: Any, *decls: str, help: str, metavar: str = "PATH") -> Any:
    """A file or folder path: never empty (`--out ''` would mean the current folder), no NUL, and no
    name longer than the file system takes (`lpxsim.core.inputs.check_path`)."""
    field = decls[0].lstrip("-") if decls else "path"
    return typer.Option(default, *decls, metavar=metavar, help=help,
                        parser=_parser(lambda v: inputs.check_path(v, field)))


def engine_release_option() -> Any:
    """`--engine-release`: the GPU engine release whose fitted host time the steps carry, checked before any work
    (`core.frameworks.release_name`)."""
    return typer.Option(LATEST, "--engine-release", metavar="RELEASE",
                        help="GPU engine release to price: latest (default), pooled (the fit over every release) "
                             "or the release in effect on a date YYYY-MM[-DD]",
                        parser=_parser(lambda v: release_name(str(v))))


def framework_option(default: str = "sglang") -> Any:
    """`--framework`: the GPU serving engine, checked (and its alias resolved: trt -> trtllm) before any work, so
    an engine lpxsim has no parameters for is named as such rather than failing every layout the search tries."""

    return typer.Option(default, "--framework", help="GPU serving engine: sglang, trtllm (trt) or vllm",
                        parser=_parser(lambda v: framework_name(str(v))))


def check_accept_given_with_mtp(accept: float | None, mtp: int) -> None:
    """`--accept` is the acceptance of `--mtp`'s drafts: given without drafts it would be dropped, so it is refused
    (a value of 0, the plan commands' default, says nothing)."""
    if mtp == 0 and accept:
        raise UserError("accept", "--accept is the draft acceptance of --mtp: give --mtp K with it")
