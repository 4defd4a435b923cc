"""Per-user speed of a pipelined LPU deployment served to many users at once.

A compiled step gives two times: the latency of one token through the whole
pipeline and the interval (the busiest stage's span, how soon the next
micro-batch may enter). A public endpoint keeps the pipeline busy with other
users' tokens: with `users` single-stream micro-batches in flight, each user's
next token can enter only after every other user's token has passed the
busiest stage, so a user's token period is max(latency, users x interval).
Batch-1 speed (users = 1) is 1 / latency; under load the interval sets it.

No Groq endpoint publishes its concurrency. A busy endpoint that serves
single-stream micro-batches keeps one in every stage (fewer leaves stages idle,
more only queues), so `full_pipeline_tok_s_user` takes users = stages: a
prediction with no fitted parameter (`benchmarks/groq_v1_served.py`).
"""

from __future__ import annotations

from lpxsim.core.errors import UserError


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


def full_pipeline_tok_s_user(latency_s: float, interval_s: float, stages: int) -> float:
    """Per-user tok/s when a busy endpoint keeps one single-stream micro-batch in every stage."""
    return served_tok_s_user(latency_s, interval_s, max(1, int(stages)))
