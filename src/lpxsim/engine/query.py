"""The question every command asks the operating-point engine, as plain frozen values.

A question is (model, deployment, workload, load, objective). Each part says what it
means in SI units and validates itself, so that every command (estimate, sweep, modes,
plan, bench, tour, serve) builds the same question from its flags and gets the same
answer from `lpxsim.engine` -- never a second, private solution.

- `Deployment`: the hardware one answer runs on. A deployment the user gives is kept
  exactly (`given=True`); a searched one records the layout the search picked. It is
  printed beside every figure (`label()`).
- `Workload`: one request's shape: input and output tokens, and the session it belongs
  to. `session=None` is the explicit no-cache loop: every request prefills its whole
  input again. A `SessionShape` is an agentic session whose earlier turns' KV is kept.
- `Load`: closed-loop concurrency (users with one request in flight each) or an open
  arrival rate.
- `Objective`: what a search over deployments ranks by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from lpxsim.core.errors import UserError
from lpxsim.core.frameworks import POOLED

# The output tokens per request of every command that is not told otherwise (estimate, sweep, modes, plan,
# the tour): printed in every label beside the figures it shapes.
DEFAULT_OSL = 256

# The default workload of every planning answer (estimate, sweep, modes, plan point, the tour): a late turn of an
# agentic session that has reached the asked context (docs/assumptions.md, "default-session"). Each turn adds
# DEFAULT_NEW_TOKENS input tokens (tool output, the next message) to the session so far, and the agent spends
# DEFAULT_THINK_S on its tool call between a turn's last token and the next turn, its KV held meanwhile.
# Both are the means of examples/workloads/agentic-sessions.yaml (issue 27's "about 2K new tokens per turn").
DEFAULT_NEW_TOKENS = 2_000
DEFAULT_THINK_S = 3.0
SESSION_KINDS = ("agentic", "none")  # --session: the default agentic session, or the explicit no-cache loop


def _positive_int(field: str, v: object, lo: int = 1) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise UserError(field, f"expected an integer >= {lo}, got {v!r}")


@dataclass(frozen=True)
class SessionShape:
    """An agentic session: a first turn of `first_isl` input tokens, then `turns - 1` turns that each add
    `new_tokens` input tokens (tool output, the user's next message) to everything before, with `think_s`
    of tool or think time between a turn's last token and the next turn's arrival. The session keeps its
    KV between turns while the deployment holds it, so a later turn prefills only its uncached tokens.

    `context_cap` bounds the session's context: a turn that would pass it is truncated to the newest
    `context_cap` tokens (the rule `docs/serving.md` states).
    """

    first_isl: int
    new_tokens: int
    turns: int
    think_s: float = 0.0
    context_cap: int | None = None

    def __post_init__(self) -> None:
        _positive_int("first_isl", self.first_isl)
        _positive_int("new_tokens", self.new_tokens)
        _positive_int("turns", self.turns)
        if not (isinstance(self.think_s, (int, float)) and math.isfinite(self.think_s) and self.think_s >= 0):
            raise UserError("think_s", f"expected a non-negative number of seconds, got {self.think_s!r}")
        if self.context_cap is not None:
            _positive_int("context_cap", self.context_cap)

    @property
    def think_per_turn_s(self) -> float:
        """The mean think time a turn: the session thinks between its turns, `turns - 1` times, and ends after
        its last (the user's next session starts then, as the simulator's closed loop of sessions does)."""
        return float(self.think_s) * (self.turns - 1) / self.turns

    def label(self) -> str:
        cap = f", cap {self.context_cap:,}" if self.context_cap else ""
        return (f"agentic session: {self.first_isl:,} first + {self.new_tokens:,} new tokens/turn x "
                f"{self.turns} turns, {self.think_s:g} s think{cap}")


def default_session(isl: int, osl: int, new_tokens: int | None = None,
                    think_s: float | None = None) -> SessionShape | None:
    """The agentic session whose last turn is a request of `isl` input tokens: each turn adds `new_tokens`
    (default DEFAULT_NEW_TOKENS) to the session so far (the previous prompt and its `osl` output tokens), with
    `think_s` (default DEFAULT_THINK_S) of tool time between turns. The session starts from the first turn that
    leaves a whole number of turns up to `isl`, so its last turn is the request asked about.

    None where `isl` is no longer than one turn's new tokens: such a request is a session's first turn, with no
    prefix to reuse (the no-cache loop)."""
    new = DEFAULT_NEW_TOKENS if new_tokens is None else new_tokens
    think = DEFAULT_THINK_S if think_s is None else think_s
    _positive_int("new_tokens", new)
    if isl <= new:
        return None
    step = new + osl  # a later turn's prompt grows by the previous turn's output and its own new tokens
    turns = 1 + (isl - new) // step
    return SessionShape(first_isl=isl - (turns - 1) * step, new_tokens=new, turns=turns, think_s=think)


def session_for(kind: str, isl: int, osl: int, new_tokens: int | None = None,
                think_s: float | None = None) -> SessionShape | None:
    """The session of a `--session` choice: "agentic" (the default session, `default_session`) or "none" (the
    explicit no-cache loop: every request prefills its whole input, no think time)."""
    if kind not in SESSION_KINDS:
        raise UserError("session", f"expected one of {', '.join(SESSION_KINDS)}, got {kind!r}")
    if kind == "none":
        if new_tokens is not None or think_s is not None:
            raise UserError("session", "--new-tokens and --think-s describe an agentic session, not --session none")
        return None
    if new_tokens is not None and new_tokens > isl:  # asked for: a turn's new tokens are part of its input
        raise UserError("new_tokens", f"expected 1..{isl:,} new tokens a turn (they are part of the request's "
                                      f"{isl:,} input tokens), got {new_tokens:,}")
    return default_session(isl, osl, new_tokens, think_s)


@dataclass(frozen=True)
class Workload:
    """One request's shape. `isl` is the context the request attends over (for a session turn: the whole
    session so far); `osl` its output tokens. `session` None: no prefix reuse (each request prefills all
    of `isl`)."""

    isl: int
    osl: int
    session: SessionShape | None = None

    def __post_init__(self) -> None:
        _positive_int("isl", self.isl)
        _positive_int("osl", self.osl)

    @property
    def context(self) -> int:
        """Tokens of KV a request holds at its end."""
        return self.isl + self.osl

    @property
    def prefilled(self) -> int:
        """Input tokens a request prefills: a session's later turn only its new tokens (the rest is cached)."""
        return self.isl if self.session is None else min(self.isl, self.session.new_tokens)

    @property
    def think_s(self) -> float:
        """Tool or think time between a session's turns (its KV held meanwhile); 0 in the no-cache loop."""
        return 0.0 if self.session is None else float(self.session.think_s)

    @property
    def think_per_turn_s(self) -> float:
        """The mean think time in each user's cycle per turn (`SessionShape.think_per_turn_s`); 0 without a
        session. Little's law over a user's cycle counts this, not `think_s`: no tool call follows a last turn."""
        return 0.0 if self.session is None else self.session.think_per_turn_s

    def label(self) -> str:
        if self.session is None:
            return f"ISL {self.isl:,} / OSL {self.osl:,}, no prefix reuse (full prefill each request)"
        cached = self.isl - self.prefilled
        return (f"ISL {self.isl:,} / OSL {self.osl:,}, {self.session.label()}; a turn at ISL {self.isl:,} "
                f"prefills {self.prefilled:,} new tokens ({cached:,} cached)")


@dataclass(frozen=True)
class Load:
    """Closed loop: `concurrency` users, each sending its next request when the last one ends (InferenceX,
    AIPerf). Open loop: `rate_per_s` Poisson arrivals. Exactly one is given."""

    concurrency: int | None = None
    rate_per_s: float | None = None

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate_per_s is None):
            raise UserError("concurrency", "give either a concurrency or an arrival rate, not both or neither")
        if self.concurrency is not None:
            _positive_int("concurrency", self.concurrency)
        elif not (isinstance(self.rate_per_s, (int, float)) and math.isfinite(self.rate_per_s)
                  and self.rate_per_s > 0):
            raise UserError("rate", f"expected a positive arrival rate per second, got {self.rate_per_s!r}")

    def label(self) -> str:
        if self.concurrency is not None:
            return f"concurrency {self.concurrency:,}"
        return f"{self.rate_per_s:g} requests/s"


class Objective(StrEnum):
    """What a deployment search ranks by (`lpxsim.engine` search)."""

    LATENCY = "latency"  # the most tok/s per user at the load
    EFFICIENCY = "efficiency"  # the most tok/s per MW with every user at >= the tok/s/user target
    THROUGHPUT = "throughput"  # the most output tok/s per replica


@dataclass(frozen=True)
class Deployment:
    """The hardware one answer runs on: `replicas` copies of one replica laid out as `layout` on `chips`
    chips of `system`. `given`: the user stated it (kept exactly; a load it cannot hold is reported, never
    moved to a bigger deployment). `layout` is the backend's own layout string (LPX: tp, stages, kvsplit,
    kvspread; GPU: TP/EP/PP/attention-DP)."""

    system: str
    chips: int
    layout: str = ""
    replicas: int = 1
    given: bool = False
    # Chips the deployment holds beyond its replicas (a rack given whole whose layout leaves chips over): they
    # are powered, so they count in the deployment's power and tok/s/MW.
    idle_chips: int = 0
    framework: str = ""  # GPU: the serving engine (sglang, trtllm, vllm); "" on LPX
    # GPU: the engine release whose fitted host time the steps carry ("2026-05"; "pooled" where the engine has none
    # fitted); "" on LPX and for a deployment not yet placed
    engine_release: str = ""

    def __post_init__(self) -> None:
        _positive_int("chips", self.chips)
        _positive_int("replicas", self.replicas)
        _positive_int("idle_chips", self.idle_chips, lo=0)

    @property
    def total_chips(self) -> int:
        return self.chips * self.replicas

    @property
    def powered_chips(self) -> int:
        """Chips that draw power: every replica's and the idle ones."""
        return self.total_chips + self.idle_chips

    @property
    def power_w(self) -> float:
        """All-in power of the deployment: its share of its units' power, per powered chip."""
        from lpxsim.catalog import get_system

        s = get_system(self.system)
        return float(s.power_w) * self.powered_chips / s.chips_per_unit

    def label(self) -> str:
        """'1 lpx rack (256 chips: 2 replicas x 128 chips, tp=16,stages=8,kvsplit=4), 194 kW'."""
        from lpxsim.catalog import get_system

        s = get_system(self.system)
        units = self.powered_chips / s.chips_per_unit
        if units.is_integer():
            size = f"{units:g} {s.name} {s.unit_name}{'s' if units != 1 else ''}"
            inner = f"{self.powered_chips:,} chips"
        else:  # part of a unit: the chips say it
            size, inner = f"{self.powered_chips:,} {s.name} chips", f"{units:.3g} {s.unit_name}"
        if self.replicas > 1 or self.idle_chips:  # a replica smaller than the powered chips says its size
            inner += f": {self.replicas} replica{'s' if self.replicas > 1 else ''} x {self.chips:,} chips"
        if self.idle_chips:
            inner += f", {self.idle_chips:,} idle"
        if self.layout:
            inner += f", {self.layout}"
        if self.framework:
            inner += f", {self.framework}"
            if self.engine_release and self.engine_release != POOLED:  # a fitted release: the software priced
                inner += f" {self.engine_release}"
        return f"{size} ({inner}), {self.power_w / 1e3:,.1f} kW"
