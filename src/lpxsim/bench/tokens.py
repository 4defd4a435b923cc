"""Token counting the Artificial Analysis way: OpenAI's o200k_base, loaded offline.

AA counts every model's tokens with o200k_base so that speeds of models with
different tokenizers are comparable. The BPE ranks ship inside the `bpe-openai`
wheel (`bpe_openai/data/o200k_base.tiktoken.gz`); we build a `tiktoken.Encoding`
from them, so nothing is downloaded.

The simulator counts *native* tokens (the served model's own tokenizer). The two
are related by `o200k_per_native`: o200k tokens per native token of the same
text. No public source gives it for Gemma 4's tokenizer, so it is an assumption
(default 1.0, docs/assumptions.md "Benchmarks and reports"); the user may
measure it on their own text with `measure_ratio` and pass it in.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lpxsim.core.errors import UserError

DEFAULT_O200K_PER_NATIVE = 1.0


@cache
def o200k():
    """The o200k_base encoding as a `tiktoken.Encoding`, built from the ranks bpe-openai ships."""
    import warnings

    import tiktoken

    with warnings.catch_warnings():  # bpe-openai opens its data (at import) with a deprecated importlib call
        warnings.simplefilter("ignore", DeprecationWarning)
        from bpe_openai import registry

        spec = registry.o200k_base()
    return tiktoken.Encoding(
        spec["name"],
        pat_str=spec["pat_str"],
        mergeable_ranks=spec["mergeable_ranks"],
        special_tokens=spec["special_tokens"],
    )


def count_o200k(text: str) -> int:
    """Number of o200k_base tokens in `text` (special-token strings count as plain text)."""
    return len(o200k().encode(text, disallowed_special=()))


def count_file(path: str | Path) -> int:
    """o200k_base tokens in a UTF-8 text file; a user error if it cannot be read."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError("prompt-file", f"cannot read {str(p)!r} as UTF-8 text: {e}") from None
    return count_o200k(text)


def measure_ratio(text: str, native_tokens: int) -> float:
    """o200k tokens per native token for a text whose native token count is known."""
    if native_tokens <= 0:
        raise UserError("native-tokens", f"expected a positive count, got {native_tokens}")
    return count_o200k(text) / native_tokens


# Any real tokenizer's count of one text is within a few tens of percent of o200k's: 0.1-10 bounds them all (a
# ratio of 1e-300 had asked for contexts of 1e303 native tokens)
RATIO_RANGE = (0.1, 10.0)


@dataclass(frozen=True)
class TokenConversion:
    """How native tokens convert to o200k_base tokens: o200k = native x `o200k_per_native`."""

    o200k_per_native: float = DEFAULT_O200K_PER_NATIVE
    source: str = "assumption:aa-token-ratio (default 1.0; no public Gemma-4/o200k ratio)"

    def __post_init__(self) -> None:
        if not (RATIO_RANGE[0] <= self.o200k_per_native <= RATIO_RANGE[1]):
            raise UserError("token-ratio", f"expected a ratio in {RATIO_RANGE[0]:g}..{RATIO_RANGE[1]:g}, "
                                           f"got {self.o200k_per_native}")

    def to_native(self, o200k_tokens: int) -> int:
        """Native tokens of a text that is `o200k_tokens` long in o200k_base (at least 1)."""
        return max(1, round(o200k_tokens / self.o200k_per_native))

    def to_o200k(self, native_tokens: float) -> float:
        return native_tokens * self.o200k_per_native
