"""The emulator's default SRAM per chip places every tiny config on 1-64 chips; overflow errors give exact bytes.

Sizing needs only the model spec and the compiler (no torch): the numerics on these sizes are checked by
test_emulate_program.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lpxsim.core.errors import DoesNotFit
from lpxsim.lpu import compile_program
from lpxsim.lpu.emulate.compare import PRECISION, largest_tensor_bytes, run_layout, run_phases, sram_for
from lpxsim.specs.accounting import weight_bytes
from lpxsim.specs.model import ModelSpec

DATA = Path(__file__).parent / "data" / "emulate"
CONFIGS = ["llama_tiny", "gemma4_tiny", "mixtral_tiny", "qwen3_tiny"]


def spec(name: str) -> ModelSpec:
    return ModelSpec.from_path(DATA / f"{name}.json")


def _run_compiles(m: ModelSpec, chips: int, sram: int, prompt: int = 8, steps: int = 6) -> None:
    """The run's prefill and last decode step compile and verify on the one layout all its steps share."""
    lay = run_layout(m, chips, None, sram, prompt, steps)
    for phase in run_phases(prompt, steps):
        r = compile_program(m, "lpx", chips=chips, phase=phase, weights=PRECISION, kv=PRECISION, layout=lay,
                            chip_sram_bytes=sram, context=prompt + steps)
        assert r.report.ok, r.report.errors[:3]
        assert r.timing.chips <= chips and r.layout == lay


def _check(name: str, chips: int) -> None:
    m = spec(name)
    sram = sram_for(m, chips)
    assert sram >= largest_tensor_bytes(m)
    assert sram >= 2 * weight_bytes(m, PRECISION) / chips  # never below the old rule
    _run_compiles(m, chips, sram)


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("chips", [16, 24])
def test_default_sram_places_where_it_used_to_fail(name: str, chips: int) -> None:
    """16 and 24 chips failed with "chip 0 needs 0.1 MB > 0.1 MB SRAM" before issue 13."""
    _check(name, chips)


@pytest.mark.parametrize("chips", [1, 2, 3, 64])
def test_default_sram_places_llama_on_few_and_many_chips(chips: int) -> None:
    _check("llama_tiny", chips)


@pytest.mark.heavy
@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("chips", [1, 2, 3, 4, 5, 6, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64])
def test_default_sram_places_every_config_on_1_to_64_chips(name: str, chips: int) -> None:
    _check(name, chips)


def test_the_old_rule_fails_on_16_chips() -> None:
    """Negative control: twice the weights over 16 chips does not place llama_tiny, and says by how much."""
    m = spec("llama_tiny")
    old = int(2 * weight_bytes(m, PRECISION) / 16)
    with pytest.raises(DoesNotFit) as e:
        _run_compiles(m, 16, old)
    msg = str(e.value)
    assert re.search(r"needs [\d,]+ B \(weights [\d,]+, KV [\d,]+, activations [\d,]+, buffers [\d,]+\) > "
                     r"[\d,]+ B SRAM", msg) or re.search(r"\([\d,]+ B each\)", msg), msg
    assert f"{old:,}" in msg


def test_largest_tensor_is_the_embedding_table() -> None:
    m = spec("llama_tiny")
    assert largest_tensor_bytes(m) >= m.vocab_size * m.hidden_size * 2
