"""The `--session` options every planning command shares: the default agentic session, or the no-cache loop."""

from __future__ import annotations

from typing import Any

import typer

from lpxsim.cli.validate import real_option, tokens_option
from lpxsim.engine.query import DEFAULT_NEW_TOKENS, DEFAULT_THINK_S

SESSION_HELP = ("agentic (default: a late turn of an agent session that has reached the context: "
                f"{DEFAULT_NEW_TOKENS:,} new tokens a turn over the cached rest, {DEFAULT_THINK_S:g} s tool time "
                "between turns with the KV held) or none (the no-cache loop: every request prefills its whole "
                "context again)")


def session_option() -> Any:
    return typer.Option("agentic", "--session", help=SESSION_HELP)


def new_tokens_option() -> Any:
    return tokens_option(None, "--new-tokens", help=f"agentic session: new input tokens a turn (default "
                                                   f"{DEFAULT_NEW_TOKENS:,})")


def think_option() -> Any:
    return real_option(None, "--think-s", help=f"agentic session: tool/think seconds between turns, KV held "
                                              f"(default {DEFAULT_THINK_S:g})", lo=0, hi=86_400)
