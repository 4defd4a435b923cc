"""The unsplit op graph, executed on numpy, computes the Hugging Face model's logits.

This pins the graph's numerical semantics (Gemma 4 sliding/global layers with
different head sizes, K=V, proportional RoPE, soft-capping; Llama GQA; Mixtral
top-2 routing) before any compiler splits it. Tolerance: see docs/assumptions.md
("Emulator"): float32 on both sides, |logits| <= ~30, so 1e-4 absolute.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch  # a test extra: missing, these tests must fail, not skip  # noqa: F401
import transformers  # noqa: F401

from lpxsim.graph import Phase, lower
from lpxsim.lpu.emulate import GraphInterpreter
from lpxsim.lpu.emulate.reference import (
    Reference,
    build_reference,
    hf_greedy,
    load_config,
    seeded_prompt,
)

DATA = Path(__file__).parent / "data" / "emulate"
ATOL = 1e-4
CONFIGS = ["gemma4_tiny", "llama_tiny", "mixtral_tiny", "qwen3_tiny"]


@cache
def reference(name: str, seed: int = 0) -> Reference:
    return build_reference(load_config(DATA / f"{name}.json"), seed=seed)


def interpret_greedy(ref: Reference, prompt: list[int], steps: int) -> tuple[list[int], list[np.ndarray]]:
    interp = GraphInterpreter(ref.spec, ref.weights)
    logits, tok = interp.run(lower(ref.spec, Phase.prefill(len(prompt))), np.array(prompt))
    toks, outs, ctx = [int(tok[0])], [logits[0]], len(prompt)
    for _ in range(steps):
        logits, tok = interp.run(lower(ref.spec, Phase.decode([ctx])), np.array([toks[-1]]))
        toks.append(int(tok[0]))
        outs.append(logits[0])
        ctx += 1
    return toks, outs


@pytest.mark.parametrize("name", CONFIGS)
def test_graph_interpreter_matches_hf_greedy(name: str) -> None:
    ref = reference(name)
    prompt = seeded_prompt(ref.spec.vocab_size, 8, seed=0)
    hf = hf_greedy(ref, prompt, steps=6)
    toks, logits = interpret_greedy(ref, prompt, steps=6)
    assert toks == hf.tokens
    err = max(float(np.abs(a - b).max()) for a, b in zip(logits, hf.logits, strict=True))
    assert err < ATOL, err
    assert max(float(np.abs(x).max()) for x in hf.logits) > 1.0  # logits are not trivially small


def test_gemma_spec_has_the_features_under_test() -> None:
    spec = reference("gemma4_tiny").spec
    kinds = {(layer.kind, layer.attention.head_dim, layer.attention.num_kv_heads, layer.attention.k_eq_v)
             for layer in spec.layers}
    assert kinds == {("sliding", 16, 2, False), ("full", 32, 1, True)}
    assert spec.final_logit_softcap == 30.0 and spec.tie_embeddings
    rope = [op for op in lower(spec, Phase.decode([9])) if op.kind == "rope"]
    assert {op.attrs["rope_type"] for op in rope} == {"default", "proportional"}


def test_mixtral_routes_tokens_to_different_experts() -> None:
    """The tiny MoE really exercises several experts (layer 0's router on the prompt's embeddings)."""
    ref = reference("mixtral_tiny")
    x = ref.weights["embed_tokens"][np.array(seeded_prompt(ref.spec.vocab_size, 8, 0))]
    logits = x @ ref.weights["layers.0.mlp.gate"].T
    assert len(set(np.argsort(-logits, axis=1)[:, :2].ravel().tolist())) >= 3


def test_a_wrong_weight_changes_the_logits() -> None:
    """Negative control for the comparison itself: one norm weight perturbed by 1% is detected."""
    ref = reference("llama_tiny")
    prompt = seeded_prompt(ref.spec.vocab_size, 8, seed=0)
    hf = hf_greedy(ref, prompt, steps=0)
    w = dict(ref.weights)
    w["layers.1.input_layernorm"] = w["layers.1.input_layernorm"] * np.float32(1.01)
    logits, _ = GraphInterpreter(ref.spec, w).run(lower(ref.spec, Phase.prefill(8)), np.array(prompt))
    assert float(np.abs(logits[0] - hf.logits[0]).max()) > 10 * ATOL


def test_two_sequences_in_one_prefill_match_hf_batch() -> None:

    ref = reference("llama_tiny")
    prompts = [seeded_prompt(ref.spec.vocab_size, 6, seed=s) for s in (1, 2)]
    with torch.no_grad():
        hf = ref.model(input_ids=torch.tensor(prompts)).logits[:, -1].numpy()
    logits, _ = GraphInterpreter(ref.spec, ref.weights).run(
        lower(ref.spec, Phase.prefill(6, sequences=2)), np.array(prompts).ravel())
    assert float(np.abs(logits - hf).max()) < ATOL
