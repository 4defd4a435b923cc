"""Tokens of the live endpoint: prompt counting, chat rendering, the deterministic output filler, sessions.

Prompts are counted with o200k_base (`lpxsim.bench.tokens`, loaded offline): the catalog ships no model
tokenizers, so this is the documented fallback (docs/serving.md "serve"). The output is a filler of
common English words, each one o200k token, cycled by position: `filler_text(n)` is exactly n tokens, so
a client that counts tokens itself agrees with `usage`.

Sessions (prefix identity). A prompt is cut into units of `unit_tokens` tokens named by a chained hash
of their content. A request whose complete units extend everything a known conversation has produced
(its prompts and outputs) continues that conversation: it gets the conversation's
`session_hash_base`, so in the simulation it hits the KV of earlier turns, prompts and outputs alike,
as the agentic-session workload models it (`serving.workload.AgenticWorkload`). Any other request starts
a new conversation. The index is bounded (least recently used conversations are forgotten).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import cache

WORDS = (" the", " of", " and", " to", " in", " a", " is", " that", " for", " it", " as", " with", " on",
         " was", " by", " at", " from", " this", " be", " or", " an", " are", " not", " we", " can", " has",
         " all", " one", " but", " more")  # each one o200k_base token, and they never merge
SESSION_STRIDE = 1 << 24  # prefix-unit ids per conversation (as AgenticWorkload.SESSION_STRIDE)


def encode(text: str) -> list[int]:
    """o200k_base token ids of `text` (special-token strings count as plain text)."""
    from lpxsim.bench.tokens import o200k

    return o200k().encode(text, disallowed_special=())


def render_chat(messages: list[dict]) -> str:
    """The prompt text of a chat: one block per message, then the assistant's turn is opened.

    A later turn's rendering starts with the earlier turn's rendering plus its reply, which is what
    lets a conversation that resends its history continue its session."""
    parts = []
    for m in messages:
        parts.append(f"<|{m['role']}|>\n{m['content']}<|end|>\n")
    parts.append("<|assistant|>\n")
    return "".join(parts)


def filler_text(n: int, start: int = 0) -> str:
    """Output tokens start .. start+n-1 of every reply (deterministic; exactly n o200k tokens).

    Built from whole cycles of the word list (string repetition, not a loop per token): a reply of 100K
    tokens is a millisecond, not a third of a second of the server's event loop."""
    k = len(WORDS)
    s0 = start % k
    cycle = "".join(WORDS[s0:] + WORDS[:s0])
    whole, rest = divmod(n, k)
    return cycle * whole + "".join(WORDS[(s0 + i) % k] for i in range(rest))


def filler_token(i: int) -> str:
    return WORDS[i % len(WORDS)]


def stop_cut(n: int, stop: list[str]) -> int | None:
    """Tokens generated when a reply of up to `n` tokens meets one of `stop` (the token that completes the
    stop string is generated, its text withheld), or None if none occurs."""
    if not stop:
        return None
    # The filler repeats every len(WORDS) tokens (each at least one character), so a stop string that occurs
    # at all ends within its first 2 * len(WORDS) + len(stop) tokens: search only those.
    text = filler_text(min(n, 2 * len(WORDS) + max(len(s) for s in stop)))
    ends = []
    for s in stop:
        i = text.find(s)
        if i >= 0:
            ends.append(i + len(s))
    if not ends:
        return None
    end = min(ends)
    pos = 0
    for k in range(n):
        pos += len(filler_token(k))
        if pos >= end:
            return k + 1
    return n


def visible_text(generated: int, cut: int | None, stop: list[str]) -> tuple[str, int]:
    """(text to return, tokens whose text is returned) for a reply of `generated` tokens that `cut` stopped."""
    if cut is None or generated < cut:
        return filler_text(generated), generated
    text = filler_text(cut)
    first = min(i for i in (text.find(s) for s in stop) if i >= 0)
    return text[:first], cut - 1


@cache
def _word_ids() -> tuple[int, ...]:
    return tuple(encode(w)[0] for w in WORDS)


def reply_tokens(generated: int, cut: int | None, stop: list[str]) -> list[int]:
    """Token ids of the reply text a client sees (no encoding of long replies: each filler word is one token)."""
    if cut is not None:
        return encode(visible_text(generated, cut, stop)[0])
    ids = list(_word_ids())
    return (ids * (generated // len(ids) + 1))[:generated]


def unit_hashes(tokens: list[int], unit: int) -> list[int]:
    """Chained content hashes of the complete `unit`-token units of `tokens`."""
    out = []
    h = 0
    for j in range(len(tokens) // unit):
        h = hash((h, tuple(tokens[j * unit:(j + 1) * unit])))
        out.append(h)
    return out


@dataclass
class Placement:
    """Where a request sits in its conversation: the simulation's session ids and the units it extends."""

    session: int
    session_hash_base: int
    hashes: list[int]


class SessionIndex:
    """Conversations by the content of their units (bounded, least recently used forgotten first)."""

    def __init__(self, unit_tokens: int, max_sessions: int = 50_000, max_units: int = 1_000_000) -> None:
        self.unit = unit_tokens
        self.max_sessions = max_sessions
        self.max_units = max_units  # ~150 MB of index at most (64M tokens of history at 64-token units)
        self._total = 0
        self._owner: dict[int, tuple[int, int]] = {}  # unit hash -> (session, unit index)
        self._units: OrderedDict[int, list[int]] = OrderedDict()  # session -> its unit hashes, in order
        self._next = 0

    def place(self, prompt_tokens: list[int]) -> Placement:
        """The conversation a prompt continues (it extends all of that conversation's units), else a new one."""
        hashes = unit_hashes(prompt_tokens, self.unit)
        for j in range(len(hashes) - 1, -1, -1):
            hit = self._owner.get(hashes[j])
            if hit is None:
                continue
            sid, idx = hit
            if idx == j and len(self._units[sid]) == j + 1:
                self._units.move_to_end(sid)
                self._extend(sid, hashes)
                return Placement(sid, (sid + 1) * SESSION_STRIDE, hashes)
            break
        sid = self._new()
        self._extend(sid, hashes)
        return Placement(sid, (sid + 1) * SESSION_STRIDE, hashes)

    def record(self, placement: Placement, stream_tokens: list[int]) -> None:
        """A reply finished: its conversation now holds `stream_tokens` (prompt + reply)."""
        if placement.session in self._units:
            self._extend(placement.session, unit_hashes(stream_tokens, self.unit))

    def sessions(self, most_recent: int | None = None) -> list[int]:
        """Known conversations, oldest first (only the `most_recent` ones if given)."""
        if most_recent is None or most_recent >= len(self._units):
            return list(self._units)
        it = reversed(self._units)
        return [next(it) for _ in range(most_recent)]

    def _new(self) -> int:
        sid = self._next
        self._next += 1
        self._units[sid] = []
        self._bound()
        return sid

    def _bound(self) -> None:
        """Forget the least recently used conversations while over the session or unit limit."""
        while len(self._units) > self.max_sessions or (self._total > self.max_units and len(self._units) > 1):
            old, hs = self._units.popitem(last=False)
            self._total -= len(hs)
            for h in hs:
                if self._owner.get(h, (None,))[0] == old:
                    del self._owner[h]

    def _extend(self, sid: int, hashes: list[int]) -> None:
        have = self._units[sid]
        if len(hashes) <= len(have) or hashes[:len(have)] != have:
            return  # nothing new, or a different history (the conversation keeps what it had)
        self._total += len(hashes) - len(have)
        for j in range(len(have), len(hashes)):
            self._owner.setdefault(hashes[j], (sid, j))
            have.append(hashes[j])
        if self._total > self.max_units:
            self._units.move_to_end(sid)  # the conversation being extended is the most recent
            self._bound()
