"""Residency: verify rejects a Program in which an instruction reads data its chip does not hold at that cycle.

Activations and weights are buffers and regions (the ``dependency`` and ``weights`` classes); KV is what a
chip keeps between steps (the ``kv`` class, `lpxsim.lpu.verify_kv`). Each corruption makes one instruction read
from another chip, or too early, and must be rejected; the 24-chip GQA case of issue 28 is the cross-step
one: a decode compiled on another layout than the prefill before it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lpxsim.graph import Phase, lower
from lpxsim.lpu import Program, compile_program, verify
from lpxsim.lpu.program import stripe_positions
from lpxsim.lpu.verify_kv import KvResidency, _merge, _uncovered, kv_after
from lpxsim.specs.model import ModelSpec

DATA = Path(__file__).parent / "data" / "emulate"
LLAMA = ModelSpec.from_path(DATA / "llama_tiny.json")  # 8 query heads over 2 KV heads
# 8 query heads over 1 KV head: the model (the emulator found its 24-chip decode reading KV elsewhere)
GQA = ModelSpec.from_config({"model_type": "llama", "vocab_size": 96, "hidden_size": 48, "intermediate_size": 40,
                             "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 1,
                             "head_dim": 6, "max_position_embeddings": 128, "tie_word_embeddings": False,
                             "rms_norm_eps": 1e-5}, name="gqa-8h1kv")
GQA_SRAM = 18_000  # the emulator's default SRAM for it on 24 chips: the prefill overflows tp=8 x 1 stage


def step(spec: ModelSpec, phase: Phase, layout: str, chips: int = 8, sram: int = 400_000, kv_held=None):  # noqa: ANN001, ANN201
    """(program, graph, report) of one compiled step, verified (against `kv_held` when given)."""
    r = compile_program(spec, "lpx", chips=chips, phase=phase, weights="bf16", kv="bf16", layout=layout,
                        chip_sram_bytes=sram, context=16, kv_held=kv_held)
    return r.program, lower(spec, phase, weights="bf16", kv="bf16"), r.report


@pytest.fixture(scope="module")
def decode():
    """llama_tiny decoding two streams at 9 and 12 tokens on tp=4 x 2 stages with a 2-way KV split."""
    p, g, rep = step(LLAMA, Phase.decode([9, 12]), "tp=4,stages=2,kvsplit=2")
    assert rep.ok, rep.errors[:3]
    return p, g


def _row(p: Program, kind: str, op: str, chip: int) -> int:
    return next(k for k, i in enumerate(p.instructions) if i.kind == kind and i.op == op and i.chip == chip)


def _replace(p: Program, k: int, **changes) -> Program:
    ins = list(p.instructions)
    ins[k] = dataclasses.replace(ins[k], **changes)
    return dataclasses.replace(p, instructions=ins)


def test_attention_over_another_chips_kv_heads_is_a_kv_error(decode) -> None:
    """Chip 0 holds KV head 0, chip 2 KV head 1; swapping their attentions' query heads makes each read the
    other's KV (every head still computed once: no other check sees it)."""
    p, g = decode
    a, b = _row(p, "attention", "L0.attention", 0), _row(p, "attention", "L0.attention", 2)
    ha, hb = p.instructions[a].slice, p.instructions[b].slice
    assert ha["kv_heads"] != hb["kv_heads"]
    q = _replace(_replace(p, a, slice={**ha, "heads": hb["heads"]}), b, slice={**hb, "heads": ha["heads"]})
    rep = verify(q, g)
    assert rep.kinds() == {"kv"}, rep.errors[:5]
    assert any(e.startswith("kv: L0.attention on chip 0 ") and "kv head 1" in e and "which its chip does not hold"
               in e for e in rep.errors), rep.errors[:5]


def test_attention_over_another_stripe_is_a_kv_error(decode) -> None:
    """Chips 0 and 1 hold the even and the odd positions of KV head 0: chip 0 reading the odd ones reads KV it
    does not hold."""
    p, g = decode
    a = _row(p, "attention", "L0.attention", 0)
    ins = p.instructions[a]
    assert ins.slice["kv_stripe"] == (0, 2)
    rep = verify(_replace(p, a, slice={**ins.slice, "kv_stripe": (1, 2)}), g)
    assert "kv" in rep.kinds(), rep.errors[:5]
    assert any(e.startswith("kv: L0.attention on chip 0 ") and "stripe 1 of 2" in e for e in rep.errors)


def test_kv_write_of_fewer_heads_is_a_kv_error(decode) -> None:
    p, g = decode
    k = _row(p, "kv_write", "L1.kv_write", 2)
    ins = p.instructions[k]
    assert ins.slice["kv_heads"] == (1, 2)
    rep = verify(_replace(p, k, slice={**ins.slice, "kv_heads": (1, 1)}), g)
    assert "kv" in rep.kinds(), rep.errors[:5]
    assert any(e.startswith("kv: L1.attention on chip 2 ") and "kv head 1" in e for e in rep.errors), rep.errors[:5]


def test_kv_written_after_the_attention_reads_it_is_a_kv_error(decode) -> None:
    p, g = decode
    att = p.instructions[_row(p, "attention", "L0.attention", 1)]
    k = _row(p, "kv_write", "L0.kv_write", 1)
    w = p.instructions[k]
    late = att.cycle_end + 50
    rep = verify(_replace(p, k, cycle_start=late, first_out_cycle=late, cycle_end=late + w.cycle_end - w.cycle_start),
                 g)
    assert any(e.startswith("kv: L0.attention on chip 1 ") and "before it is written" in e for e in rep.errors), \
        rep.errors[:5]


def test_activation_read_from_another_chip_is_a_dependency_error(decode) -> None:
    p, g = decode
    k = _row(p, "matmul", "L1.q_proj", 0)
    ins = p.instructions[k]
    remote = ins.inputs[0].replace("@0", "@1")
    assert remote in p.buffers and p.buffers[remote].chip == 1
    rep = verify(_replace(p, k, inputs=(remote,)), g)
    assert "dependency" in rep.kinds(), rep.errors[:5]
    assert f"dependency: L1.q_proj on chip 0 reads {remote}, held by another chip (1)" in rep.errors


def test_weight_region_moved_to_another_chip_is_a_weights_error(decode) -> None:
    p, g = decode
    regs = list(p.regions)
    k, r = next((k, r) for k, r in enumerate(regs) if r.chip == 0 and r.name == "w:L1.q_proj")
    regs[k] = dataclasses.replace(r, chip=7, offset_bytes=p.chip_sram_bytes - r.size_bytes)
    rep = verify(dataclasses.replace(p, regions=regs), g)
    assert "weights" in rep.kinds(), rep.errors[:5]
    assert any(e.startswith("weights: L1.q_proj on chip 0 reads weight") for e in rep.errors), rep.errors[:5]


def test_steps_of_one_layout_verify_chained() -> None:
    """Prefill, then two decode steps, each verified against the KV the earlier ones left."""
    held = KvResidency()
    for phase in (Phase.prefill(8), Phase.decode([8]), Phase.decode([9])):
        p, g, rep = step(LLAMA, phase, "tp=4,stages=2,kvsplit=2,kvspread=1,kvblock=3", kv_held=held)
        assert rep.ok, rep.errors[:3]
        held = kv_after(p, g, held)


def test_a_decode_after_a_missing_step_reads_kv_nobody_wrote() -> None:
    _, _, alone = step(LLAMA, Phase.decode([9]), "tp=4,stages=2")
    assert alone.ok  # on its own: the Program's holdings stand for the earlier steps'
    p0, g0, _ = step(LLAMA, Phase.prefill(8), "tp=4,stages=2")
    _, _, rep = step(LLAMA, Phase.decode([9]), "tp=4,stages=2", kv_held=kv_after(p0, g0))  # position 8 skipped
    assert rep.kinds() == {"kv"}, rep.errors[:5]
    assert all("positions 8..8" in e and "which its chip does not hold" in e for e in rep.errors), rep.errors[:5]


def test_the_24_chip_gqa_decode_on_another_layout_than_its_prefill_is_rejected() -> None:
    """Issue 28's program: the search placed the prefill on tp=8 x 2 stages (tp=8 x 1 overflows) and the decode
    on tp=8 x 1, so the decode's chips 0-7 read layer 1's KV, which the prefill left on chips 8-15."""
    p0, g0, rep0 = step(GQA, Phase.prefill(8), "tp=8,stages=2", chips=24, sram=GQA_SRAM)
    assert rep0.ok, rep0.errors[:3]
    held = kv_after(p0, g0)
    _, _, alone = step(GQA, Phase.decode([8]), "tp=8,stages=1", chips=24, sram=GQA_SRAM)
    assert alone.ok  # nothing in the decode Program by itself is wrong
    _, _, rep = step(GQA, Phase.decode([8]), "tp=8,stages=1", chips=24, sram=GQA_SRAM, kv_held=held)
    assert rep.kinds() == {"kv"}, rep.errors[:5]
    assert rep.errors[0].startswith("kv: L1.attention on chip 0 ") and "positions 0..7, which its chip does not " \
        "hold" in rep.errors[0], rep.errors[0]
    _, _, same = step(GQA, Phase.decode([8]), "tp=8,stages=2", chips=24, sram=GQA_SRAM, kv_held=held)
    assert same.ok, same.errors[:3]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(want=st.tuples(st.integers(0, 40), st.integers(0, 40)),
       have=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=4),
       stripe=st.integers(1, 4).flatmap(lambda n: st.tuples(st.integers(0, n - 1), st.just(n), st.integers(1, 3))))
def test_uncovered_finds_exactly_the_owned_positions_outside(want, have, stripe) -> None:  # noqa: ANN001
    """`_uncovered` against sets of positions: None iff every position of `want` the stripe owns is in `have`;
    else the gap it names lies in `want`, outside `have`, and holds an owned position."""
    i, n, b = stripe
    owned = set(stripe_positions(*want, i, n, b).tolist())
    held = set().union(*(range(lo, hi) for lo, hi in have)) if have else set()
    gap = _uncovered(want, _merge(list(have)), stripe)
    if owned <= held:
        assert gap is None
    else:
        assert gap is not None and want[0] <= gap[0] < gap[1] <= want[1]
        in_gap = set(stripe_positions(int(gap[0]), int(gap[1]), i, n, b).tolist())
        assert in_gap and not in_gap & held
