"""A prefill on a KV-spread layout gathers the helpers' KV stripes to the owner (`lpxsim.lpu.emit_gather`).

The owner attends once over its share; every KV read is of KV its own chip holds (a ``kv_read`` on the helper,
the owner's own store), and verify rejects a gathering attention whose stripes do not come from kv_reads of
those stripes or do not make up its share. The emulator reproduces Hugging Face on such a prefill
(`tests/test_emulate_program.py`, the ``kvspread=1`` case); here the mechanism and the cost it saves.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lpxsim.graph import Phase, lower
from lpxsim.lpu import compile_program, verify
from lpxsim.lpu.verify_kv import kv_after
from lpxsim.specs.model import ModelSpec

DATA = Path(__file__).parent / "data" / "emulate"
LLAMA = ModelSpec.from_path(DATA / "llama_tiny.json")  # 8 query heads over 2 KV heads
SPREAD = "tp=4,stages=2,kvsplit=2,kvspread=1,kvblock=3"


def _step(phase: Phase, layout: str = SPREAD, kv_held=None):  # noqa: ANN001, ANN202
    r = compile_program(LLAMA, "lpx", chips=8, phase=phase, weights="bf16", kv="bf16", layout=layout,
                        chip_sram_bytes=400_000, context=16, kv_held=kv_held)
    return r.program, lower(LLAMA, phase, weights="bf16", kv="bf16"), r.report


@pytest.fixture(scope="module")
def prefill():
    p, g, rep = _step(Phase.prefill(8))
    assert rep.ok, rep.errors[:3]
    return p, g


def test_prefill_gathers_and_decode_ships(prefill) -> None:
    """The prefill's owners read their helpers' stripes (kv_read) and attend once; a decode step (one row per
    stream: fewer bytes than the stripes) still sends its query to the helpers and merges their outputs."""
    p, g = prefill
    kinds = [i.kind for i in p.instructions]
    gathering = [i for i in p.instructions if i.kind == "attention" and "kv_from" in i.attrs]
    assert kinds.count("kv_read") == len(gathering) > 0
    assert all(i.kind != "attention" or "kv_from" in i.attrs for i in p.instructions)  # no helper attends
    for i in gathering:  # own stripe first, then one gathered input per helper stripe; they tile the share
        (index, count), block = i.slice["kv_stripe"], i.attrs["kv_block"]
        assert block == 3 and [s[0] % count for s in i.attrs["kv_from"]] == [index] * len(i.attrs["kv_from"])
        assert len(i.inputs) == 2 + len(i.attrs["kv_from"]) - 1
    d, gd, rep = _step(Phase.decode([8]), kv_held=kv_after(p, g))
    assert rep.ok, rep.errors[:3]
    assert "kv_read" not in {i.kind for i in d.instructions}
    assert any(i.kind == "combine" and i.attrs.get("mode") == "merge" for i in d.instructions)


def _gathering_row(p) -> int:  # noqa: ANN001
    return next(k for k, i in enumerate(p.instructions) if i.kind == "attention" and "kv_from" in i.attrs)


def _with(p, k: int, **changes):  # noqa: ANN001, ANN202
    ins = list(p.instructions)
    ins[k] = dataclasses.replace(ins[k], **changes)
    return dataclasses.replace(p, instructions=ins)


def test_a_gathered_stripe_from_the_wrong_kv_read_is_a_kv_error(prefill) -> None:
    """Naming another stripe than the one its input carries: the owner would attend over KV it never got."""
    p, g = prefill
    k = _gathering_row(p)
    ins = p.instructions[k]
    own, *rest = ins.attrs["kv_from"]
    wrong = (own, *((i, n) for i, n in rest[:-1]), (rest[-1][0] ^ 1, rest[-1][1]))  # another stripe
    rep = verify(_with(p, k, attrs={**ins.attrs, "kv_from": wrong}), g)
    assert "kv" in rep.kinds() and any("gathers" in e or "no kv_read" in e for e in rep.errors)


def test_gathered_stripes_that_leave_part_of_the_share_out_are_a_kv_error(prefill) -> None:
    p, g = prefill
    k = _gathering_row(p)
    ins = p.instructions[k]
    short = dataclasses.replace(ins, inputs=ins.inputs[:2], attrs={**ins.attrs, "kv_from": ins.attrs["kv_from"][:1]})
    ps = list(p.instructions)
    ps[k] = short
    rep = verify(dataclasses.replace(p, instructions=ps), g)
    assert "kv" in rep.kinds()


def test_a_kv_read_of_kv_its_chip_does_not_hold_is_a_kv_error(prefill) -> None:
    """A helper's kv_read moved to the owner's stripe reads positions the helper never stored."""
    p, g = prefill
    k = next(k for k, i in enumerate(p.instructions) if i.kind == "kv_read")
    ins = p.instructions[k]
    index, count = ins.slice["kv_stripe"]
    moved = {**ins.slice, "kv_stripe": ((index + 1) % count, count)}
    rep = verify(_with(p, k, slice=moved), g)
    assert "kv" in rep.kinds()
