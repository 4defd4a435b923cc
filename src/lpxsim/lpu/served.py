"""Per-user speed of a pipelined LPU deployment served to many users at once.

A compiled step gives two times: the latency of one token through the whole
pipeline and the interval (the busiest stage's span, how soon the next
micro-batch may enter). A public endpoint keeps the pipeline busy with other
users' tokens: with `users` single-stream micro-batches in flight, each user's
next token can enter only after every other user's token has passed the
busiest stage, so a user's token period is max(latency, users x interval).
Batch-1 speed (users = 1) is 1 / latency; under load the interval sets it.

`users` is not published for any Groq endpoint: for the first generation it is
the one parameter fitted (on the Llama-2-70B point, `benchmarks/groq_v1_served.py`,
stored under "served" in `catalog/fitted/lpx_fit.json`); every other
first-generation figure is a prediction with it.
"""

from __future__ import annotations

from typing import Any

from lpxsim.errors import UserError
from lpxsim.lpu.arch import load_fit


def served_period_s(latency_s: float, interval_s: float, users: float) -> float:
    """One user's token period with `users` single-stream micro-batches sharing the pipeline."""
    if users < 1:
        raise UserError("users", f"expected at least one user in flight, got {users}")
    if latency_s <= 0 or interval_s <= 0:
        raise UserError("latency", "latency and interval must be positive")
    return max(latency_s, users * interval_s)


def served_tok_s_user(latency_s: float, interval_s: float, users: float) -> float:
    """Output tok/s per user under that load (decode, one token per step)."""
    return 1.0 / served_period_s(latency_s, interval_s, users)


def served_fit(system: str) -> dict[str, Any]:
    """The fitted serving parameters of `system` ({} when none): {"users": ..., "fitted_to": {...}}."""
    return dict(load_fit().get("served", {}).get(system, {}))
