"""Speculative decoding helpers: the drafter's spec and the acceptance a target speed needs."""

from __future__ import annotations

import pytest

from lpxsim.lpu.speculative import acceptance_needed, gemma4_assistant, tokens_per_round


def test_drafter_spec_uses_published_dims() -> None:
    m = gemma4_assistant()
    assert m.num_layers == 4 and m.hidden_size == 1024
    assert m.vocab_size == 262_144 and m.tie_embeddings


@pytest.mark.parametrize("k", [1, 3, 5])
def test_tokens_per_round_bounds(k: int) -> None:
    assert tokens_per_round(k, 0.0) == pytest.approx(1.0)
    assert tokens_per_round(k, 1.0) == k + 1
    assert tokens_per_round(k, 0.3) < tokens_per_round(k, 0.7)


def test_acceptance_needed_inverts() -> None:
    p = acceptance_needed(5000.0, 3, 20e-6, 300e-6)
    assert p.accept_needed is not None
    assert tokens_per_round(3, p.accept_needed) / p.round_s == pytest.approx(5000.0, rel=1e-6)
    assert acceptance_needed(1e6, 2, 20e-6, 300e-6).accept_needed is None  # unreachable even at 100 %
