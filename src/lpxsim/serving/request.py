"""A request as the simulator tracks it: plain object with __slots__ (the hot loop touches it)."""

from __future__ import annotations

# Status values reported per request.
DONE = "completed"
REJECTED = "rejected"
INCOMPLETE = "incomplete"


class Request:
    """One inference request. Times are simulated seconds; token counts are integers.

    Prefix identity: `hash_ids[j]` names the KV of prompt tokens [j*U, (j+1)*U) including everything
    before it (U = `hash_block_tokens`), as in the Mooncake traces. A request whose context is an
    append-only session (agentic turns) sets `session_hash_base` instead, so unit j is base + j for
    prompt and output alike and a later turn can hit the blocks this turn generated.
    """

    __slots__ = (
        "rid", "arrival_s", "isl", "osl", "hash_ids", "hash_block_tokens", "session_hash_base",
        "session", "turn", "last_turn", "klass", "accept_rate",
        # progress
        "pool", "worker", "prefill_left", "prefill_ctx", "cached_tokens", "generated", "ctx0",
        "join_step", "finish_step", "kv_charge", "kv_growth", "units_ref", "preemptions",
        "spec_rounds", "spec_accepted", "handoff_s", "reloaded_tokens", "kv_source",
        # results
        "first_token_s", "finish_s", "status", "reason", "decode_pool", "decode_worker", "decode_start_s",
    )

    def __init__(
        self,
        rid: int,
        arrival_s: float,
        isl: int,
        osl: int,
        hash_ids: tuple[int, ...] = (),
        hash_block_tokens: int = 512,
        session_hash_base: int = -1,
        session: int = -1,
        turn: int = 0,
        klass: str = "",
    ) -> None:
        self.rid = rid
        self.arrival_s = arrival_s
        self.isl = max(1, int(isl))
        self.osl = max(1, int(osl))
        self.hash_ids = hash_ids
        self.hash_block_tokens = hash_block_tokens
        self.session_hash_base = session_hash_base
        self.session = session
        self.turn = turn
        self.last_turn = False  # the session's last turn: its KV is no longer a held session's when it ends
        self.klass = klass
        self.accept_rate = 0.0
        self.pool = ""
        self.worker = -1
        self.prefill_left = self.isl
        self.prefill_ctx = 0
        self.cached_tokens = 0
        self.generated = 0
        self.ctx0 = 0
        self.join_step = 0
        self.finish_step = 0
        self.kv_charge = 0.0
        self.kv_growth = 0.0
        self.units_ref: tuple[int, ...] = ()
        self.preemptions = 0
        self.spec_rounds = 0
        self.spec_accepted = 0
        self.handoff_s = float("nan")
        self.kv_source = None  # PD: the prefill worker holding this request's KV until a decode worker has it
        self.reloaded_tokens = 0  # of cached_tokens, those reloaded from an offload tier
        self.first_token_s = float("nan")
        self.finish_s = float("nan")
        self.status = INCOMPLETE
        self.reason = ""
        self.decode_pool = ""
        self.decode_worker = -1
        self.decode_start_s = float("nan")  # PD: when a decode worker took the request into its batch

    def unit_ids(self, tokens: int) -> tuple[int, ...] | range:
        """Prefix-unit ids covering the first `tokens` tokens (complete units only)."""
        n = tokens // self.hash_block_tokens
        if self.session_hash_base >= 0:  # a session's chain: consecutive ids, as a range (no tuple to build)
            b = self.session_hash_base
            return range(b, b + n)
        return self.hash_ids[:n]
