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

from collections.abc import Callable, Sequence

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

# Acceptance measured under a named benchmark's conditions, where it differs from the model's default:
# (model family, conditions) -> ((drafts, mean tokens per round), source). The profile keeps the default's
# per-position decay (the MTP module's reuse for later positions, NEBIUS-MTP) and lowers its first position
# until it gives the measured mean (`first_for_length`; assumption "mtp-condition-shape").
# "inferencex": random-token prompts wrapped in the model's chat template, as every InferenceX DeepSeek-R1 MTP
# run sends them; InferenceX's maintainers measured about 2.50 tokens a round there, as on MT-Bench (IX-649,
# "at least three" drafts: taken as three, what InferenceX's single-node MI355X SGLang scripts draft).
CONDITION_ACCEPT: dict[tuple[str, str], tuple[tuple[int, float], str]] = {
    ("deepseek-r1", "inferencex"): ((3, 2.50), "IX-649"),
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
    return _unit_root(lambda d: tokens_per_round(_geometric(first, d, drafts)), mean_tokens)


def _unit_root(rising: Callable[[float], float], target: float) -> float:
    """The x in [0, 1] where the non-decreasing `rising(x)` reaches `target` (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if rising(mid) > target:
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


def first_for_length(decay: float, drafts: int, mean_tokens: float) -> float:
    """The first-position acceptance a_1 for which a_i = a_1 x decay^(i-1) over `drafts` positions gives
    `mean_tokens` per round (bisection; tokens per round rises with a_1)."""
    if not 1.0 <= mean_tokens < tokens_per_round(_geometric(1.0 - 1e-9, decay, drafts)):
        raise UserError("accept", f"{mean_tokens} tokens per round is not reachable with decay {decay}")
    return _unit_root(lambda a: tokens_per_round(_geometric(a, decay, drafts)), mean_tokens)


def condition_accept(model: ModelSpec, conditions: str) -> tuple[tuple[float, ...], str]:
    """(per-position acceptance, source) of `model` under a benchmark's `conditions` (`CONDITION_ACCEPT`): the
    default profile's decay, its first position set by the measured mean tokens a round; the default profile
    (`default_accept`) where nothing was measured under those conditions."""
    name = model.name.lower()
    for (prefix, cond), ((drafts, length), src) in CONDITION_ACCEPT.items():
        if cond == conditions and name.startswith(prefix):
            first, (d_drafts, d_length), _ = next(v for k, v in DEFAULT_ACCEPT.items() if name.startswith(k))
            decay = decay_for_length(first, d_drafts, d_length)
            return _geometric(first_for_length(decay, drafts, length), decay, MAX_DRAFT_POSITIONS), src
    return default_accept(model), next((v[2] for k, v in DEFAULT_ACCEPT.items() if name.startswith(k)), "")
