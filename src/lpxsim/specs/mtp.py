"""Multi-token prediction (MTP): a model's own draft head, and its acceptance per draft position.

A model that ships MTP modules (DeepSeek-V3/R1: `num_nextn_predict_layers`) drafts with them inside the
engine; each round verifies k + 1 positions. Acceptance is not one rate: the i-th draft token is accepted
with a conditional probability a_i (given drafts 1..i-1 were), and a_i falls with i because DeepSeek's one
MTP module was trained to predict one token ahead and is reused autoregressively for later positions
(docs/sources.md "NEBIUS-MTP"). The default profile per model is a_i = a_1 x d^(i-1):

- a_1 = 0.85, the lower end of DeepSeek-V3's reported 85-90 % acceptance of the second predicted token
  (arXiv 2412.19437 section 5.4.3, "DSV3-MTP");
- d = 0.856, the decay at which that a_1 gives the original MTP module's published mean acceptance length
  of 3.20 tokens per round with 7 chained drafts (temperature 0, "NEBIUS-MTP"); `decay_for_length`
  derives it, so the number is reproduced from the two sources, not fitted to any serving measurement.

With 3 drafts the profile yields 2.85 tokens per round where one flat 0.85 rate gave 3.19 (+12 %).
A scalar acceptance given by the user is a flat profile (the same rate at every position).
"""

from __future__ import annotations

from collections.abc import Sequence

from lpxsim.core.errors import UserError
from lpxsim.specs.model import ModelSpec

MAX_DRAFT_POSITIONS = 16  # longest profile a default gives (no engine drafts more with one MTP module)

# DeepSeek MTP: first-position acceptance (DSV3-MTP) and the published mean acceptance length of the
# original module at 7 chained drafts (NEBIUS-MTP), from which the per-position decay is derived
DSV3_FIRST_ACCEPT = 0.85
DSV3_LENGTH_AT_7 = (7, 3.20)

# model family (lower-case name prefix) -> (first-position acceptance, (drafts, mean tokens per round), sources)
DEFAULT_ACCEPT: dict[str, tuple[float, tuple[int, float], str]] = {
    "deepseek-v3": (DSV3_FIRST_ACCEPT, DSV3_LENGTH_AT_7, "DSV3-MTP; NEBIUS-MTP"),
    "deepseek-r1": (DSV3_FIRST_ACCEPT, DSV3_LENGTH_AT_7, "DSV3-MTP; NEBIUS-MTP"),  # same MTP module design
}

Acceptance = float | Sequence[float]


def has_mtp(model: ModelSpec) -> bool:
    return model.mtp_layers > 0


def tokens_per_round(accepts: Sequence[float]) -> float:
    """Expected tokens one draft-and-verify round emits: 1 (the target's own token) plus each draft
    position's probability of being reached and accepted, prod_{j<=i} a_j. The one formula the steady
    state and the simulator's expectations use."""
    total, reach = 1.0, 1.0
    for a in accepts:
        reach *= a
        total += reach
    return total


def profile(accept: Acceptance, k: int) -> tuple[float, ...]:
    """The conditional acceptance of each of `k` draft positions: a scalar is the same rate at every
    position; a sequence is taken position by position (its last value repeats if it is shorter)."""
    if k <= 0:
        return ()
    if isinstance(accept, (int, float)):
        rates = (float(accept),) * k
    else:
        given = tuple(float(a) for a in accept)
        if not given:
            raise UserError("accept", "expected at least one acceptance rate")
        rates = (given + (given[-1],) * k)[:k]
    for a in rates:
        if not 0.0 <= a < 1.0:
            raise UserError("accept", f"expected acceptance rates in [0, 1), got {a!r}")
    return rates


def accepted_drafts(rates: Sequence[float], uniforms: Sequence[float]) -> int:
    """Leading drafts accepted in one round: position i passes when its uniform draw is below a_i; the
    first rejection ends the round (the simulator's draw of `tokens_per_round`)."""
    n = 0
    for a, u in zip(rates, uniforms, strict=False):
        if u >= a:
            break
        n += 1
    return n


def decay_for_length(first: float, drafts: int, mean_tokens: float) -> float:
    """The per-position decay d for which a_i = first x d^(i-1) over `drafts` positions gives
    `mean_tokens` per round (bisection; tokens per round rises with d)."""
    if not 1.0 <= mean_tokens <= tokens_per_round((first,) * drafts):
        raise UserError("accept", f"{mean_tokens} tokens per round is not reachable with first acceptance {first}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if tokens_per_round(_geometric(first, mid, drafts)) > mean_tokens:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def _geometric(first: float, decay: float, n: int) -> tuple[float, ...]:
    return tuple(first * decay**i for i in range(n))


def default_accept(model: ModelSpec) -> tuple[float, ...]:
    """The sourced per-position MTP acceptance of `model` (MAX_DRAFT_POSITIONS positions);
    UserError naming `accept` when there is none."""
    name = model.name.lower()
    for prefix, (first, (drafts, length), _src) in DEFAULT_ACCEPT.items():
        if name.startswith(prefix):
            return _geometric(first, decay_for_length(first, drafts, length), MAX_DRAFT_POSITIONS)
    why = "has no MTP head" if not has_mtp(model) else "has no published MTP acceptance"
    raise UserError("accept", f"{model.name} {why}; give --accept for its draft acceptance rate")
