"""Programs over several sequences and over a prefill chunk that continues a cached context.

Rows are sequence-major and each sequence has its own KV on the chips; a
chunked prefill attends to the KV its chips wrote in the previous chunk. Every
step is verified against the KV the steps before it left (`Chain`).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch  # a test extra: missing, these tests must fail, not skip  # noqa: F401
import transformers  # noqa: F401

from lpxsim.graph import Phase, lower
from lpxsim.lpu.emulate import ProgramExecutor
from lpxsim.lpu.emulate.compare import LOGIT_ATOL, PRECISION, compile_step, default_sram_bytes
from lpxsim.lpu.emulate.reference import Reference, build_reference, load_config, seeded_prompt
from lpxsim.lpu.program import Program
from lpxsim.lpu.verify_kv import KvResidency, kv_after

DATA = Path(__file__).parent / "data" / "emulate"


@cache
def reference(name: str) -> Reference:
    return build_reference(load_config(DATA / f"{name}.json"), seed=3)


class Chain:
    """Compiles a run's steps in order, each verified against the KV its predecessors left on the chips."""

    def __init__(self, ref: Reference, chips: int, layout: str, sram: int) -> None:
        self.ref, self.chips, self.layout, self.sram = ref, chips, layout, sram
        self.held = KvResidency()

    def step(self, phase: Phase) -> Program:
        p = compile_step(self.ref, phase, self.chips, self.layout, self.sram, 16, self.held)  # raises if not ok
        self.held = kv_after(p, lower(self.ref.spec, phase, weights=PRECISION, kv=PRECISION), self.held)
        return p


@pytest.mark.parametrize(("name", "chips", "layout"), [("llama_tiny", 4, "tp=4,stages=1"),
                                                       ("gemma4_tiny", 4, "tp=2,stages=2")])
def test_two_sequences_prefill_and_decode_match_hf_batch(name: str, chips: int, layout: str) -> None:
    ref = reference(name)
    sram = default_sram_bytes(ref, chips)
    prompts = [seeded_prompt(ref.spec.vocab_size, 6, seed=s) for s in (5, 6)]
    ex = ProgramExecutor(ref.spec, ref.weights)
    chain = Chain(ref, chips, layout, sram)
    res = ex.run(chain.step(Phase.prefill(6, sequences=2)), np.ravel(prompts))
    with torch.no_grad():
        import transformers

        cache_ = transformers.DynamicCache(config=ref.model.config)
        hf = ref.model(input_ids=torch.tensor(prompts), cache=cache_, use_cache=True).logits[:, -1].numpy()
        assert float(np.abs(res.logits - hf).max()) < LOGIT_ATOL
        toks = res.tokens
        assert np.array_equal(toks, hf.argmax(-1))
        for step in range(3):
            res = ex.run(chain.step(Phase.decode([6 + step] * 2)), toks)
            hf = ref.model(input_ids=torch.tensor(toks[:, None]), cache=cache_, use_cache=True).logits[:, -1].numpy()
            assert float(np.abs(res.logits - hf).max()) < LOGIT_ATOL
            assert np.array_equal(res.tokens, hf.argmax(-1))
            toks = res.tokens


@pytest.mark.parametrize(("name", "layout"), [("gemma4_tiny", "tp=2,stages=2"), ("mixtral_tiny", "tp=2,stages=2")])
def test_chunked_prefill_continues_the_chips_kv(name: str, layout: str) -> None:
    """Two prefill chunks of 5 (the second over a cached context of 5) = one HF forward over 10 tokens."""
    ref = reference(name)
    sram = default_sram_bytes(ref, 4)
    prompt = seeded_prompt(ref.spec.vocab_size, 10, seed=7)
    ex = ProgramExecutor(ref.spec, ref.weights)
    chain = Chain(ref, 4, layout, sram)
    ex.run(chain.step(Phase.prefill(5)), prompt[:5])
    res = ex.run(chain.step(Phase.prefill(5, context=5)), prompt[5:])
    with torch.no_grad():
        hf = ref.model(input_ids=torch.tensor([prompt])).logits[0, -1].numpy()
    assert float(np.abs(res.logits[0] - hf).max()) < LOGIT_ATOL
    assert int(res.tokens[0]) == int(hf.argmax())
