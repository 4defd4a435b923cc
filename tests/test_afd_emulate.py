"""An AFD split computes the Hugging Face logits: attention in the HF model, every layer's FFN (MoE experts
included) as a compiled, verified FFN-only LPX Program run on the numpy emulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from lpxsim.lpu.emulate.afd import afd_logits, compile_ffn_layer  # noqa: E402
from lpxsim.lpu.emulate.compare import LOGIT_ATOL, default_sram_bytes  # noqa: E402
from lpxsim.lpu.emulate.reference import build_reference, load_config, seeded_prompt  # noqa: E402

DATA = Path(__file__).parent / "data" / "emulate"


@pytest.mark.parametrize("name,chips,layout", [("llama_tiny", 4, "tp=2,stages=2"),
                                               ("mixtral_tiny", 4, "tp=2,stages=2"),
                                               ("mixtral_tiny", 2, "tp=2,stages=1")])
def test_afd_split_computes_the_hf_logits(name: str, chips: int, layout: str) -> None:
    ref = build_reference(load_config(DATA / f"{name}.json"), seed=0)
    prompt = seeded_prompt(ref.spec.vocab_size, 6, 0)
    split, plain = afd_logits(ref, prompt, chips, layout, default_sram_bytes(ref, chips))
    assert np.abs(split - plain).max() <= LOGIT_ATOL


def test_a_wrong_ffn_program_is_caught() -> None:
    ref = build_reference(load_config(DATA / "mixtral_tiny.json"), seed=0)
    prompt = seeded_prompt(ref.spec.vocab_size, 6, 0)
    split, plain = afd_logits(ref, prompt, 2, "tp=2,stages=1", default_sram_bytes(ref, 2), layer_map={0: 1, 1: 0})
    assert np.abs(split - plain).max() > 100 * LOGIT_ATOL


def test_ffn_only_program_holds_no_attention_kv_or_head() -> None:
    ref = build_reference(load_config(DATA / "mixtral_tiny.json"), seed=0)
    prog = compile_ffn_layer(ref, 1, 4, 2, "tp=2,stages=1", default_sram_bytes(ref, 2))
    kinds = {i.kind for i in prog.instructions}
    assert "experts" in kinds and "router" in kinds
    assert not kinds & {"attention", "kv_write", "embed", "sample"}
    assert {i.op.split(".")[0] for i in prog.instructions if "." in i.op} == {"L1"}
