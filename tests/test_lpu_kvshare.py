"""KV ownership of a sequence-split layer is a fixed property of the layout; tp=1 stages hold whole ops.

A split layer's KV positions are striped in `kv_block`-token blocks over its
holders: the share of each chip must not depend on the step's context (decode
steps at growing contexts must agree on who holds which position), the shares
must partition every position and every attended (query, key) pair, and each
share stays balanced to within a block.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lpxsim.graph import Phase
from lpxsim.lpu import compile_program
from lpxsim.lpu.lowering import KvStripe, attended_in_share
from lpxsim.lpu.program import stripe_count, stripe_positions
from lpxsim.specs.model import ModelSpec

DATA = Path(__file__).parent / "data" / "emulate"


def _compile(layout: str, phase: Phase, name: str = "llama_tiny", chips: int = 8, context: int = 64):
    return compile_program(ModelSpec.from_path(DATA / f"{name}.json"), "lpx", chips=chips, context=context,
                           phase=phase, layout=layout, chip_sram_bytes=400_000, weights="bf16", kv="bf16")


@given(x=st.integers(0, 200), count=st.integers(1, 6), block=st.integers(1, 5), data=st.data())
@settings(max_examples=200, deadline=None)
def test_stripe_count_is_the_brute_force_count(x: int, count: int, block: int, data) -> None:  # noqa: ANN001
    index = data.draw(st.integers(0, count - 1))
    brute = sum(1 for p in range(x) if (p // block) % count == index)
    assert stripe_count(x, index, count, block) == brute
    assert len(stripe_positions(0, x, index, count, block)) == brute
    assert abs(brute - x / count) <= block  # balanced to within a block at any length


@given(ctx=st.integers(0, 120), new=st.integers(1, 9), window=st.sampled_from([None, 1, 4, 7]),
       count=st.integers(1, 5), block=st.integers(1, 4))
@settings(max_examples=150, deadline=None)
def test_shares_partition_keys_and_pairs(ctx: int, new: int, window: int | None, count: int, block: int) -> None:
    whole_pairs, whole_keys = attended_in_share(ctx, new, window, KvStripe())
    parts = [attended_in_share(ctx, new, window, KvStripe(i, count, block)) for i in range(count)]
    assert sum(p for p, _ in parts) == whole_pairs
    assert sum(k for _, k in parts) == whole_keys
    ends = np.arange(ctx + 1, ctx + new + 1)
    starts = np.zeros_like(ends) if window is None else np.maximum(0, ends - window)
    assert whole_pairs == float((ends - starts).sum())


@pytest.mark.parametrize("layout", ["tp=4,stages=2,kvsplit=2", "tp=4,stages=2,kvsplit=2,kvspread=1,kvblock=3"])
def test_kv_shares_do_not_move_as_the_context_grows(layout: str) -> None:
    """Prefill and decode steps at several contexts: each chip's kv_write and its reads of its own KV hold the
    same share. A reader's own share: an attention's ``kv_stripe``, or the first of its ``kv_from`` when it
    gathers the rest (a prefill on a spread layout, `lpxsim.lpu.emit_gather`), or a ``kv_read``'s, which in
    that prefill reads what the helper's attention reads in a decode step."""
    phases = [Phase.prefill(8)] + [Phase.decode([c]) for c in (8, 9, 13, 40)]
    shares = []
    for ph in phases:
        prog = _compile(layout, ph).program
        held: dict[tuple, set] = {}
        for i in prog.instructions:
            if i.kind in ("kv_write", "attention", "kv_read"):
                stripe = i.slice.get("kv_stripe")
                if i.attrs.get("kv_from"):
                    stripe = i.attrs["kv_from"][0]
                role = "write" if i.kind == "kv_write" else "read"
                held.setdefault((i.chip, i.op.split(".")[0], role), set()).add((stripe, i.attrs.get("kv_block")))
        shares.append(held)
    assert all(s == shares[0] for s in shares[1:])
    stripes = {v[0] for k, vs in shares[0].items() if k[1:] == ("L0", "write") for v in vs}
    assert None not in stripes and len({s[1] for s in stripes}) == 1  # one count for the whole layer
    assert {s[0] for s in stripes} == set(range(next(iter(stripes))[1]))  # every share has a holder


def test_kv_regions_hold_each_shares_positions() -> None:
    """kvsplit=2, 20 streams at 10 cached + 1 new keys: stripe 0 holds 6 positions per stream, stripe 1 holds 5."""
    prog = _compile("tp=4,stages=2,kvsplit=2", Phase.decode([10] * 20)).program
    per_tok = 2 * 8 * 2  # K and V, head_dim 8, bf16: one KV head per chip
    by_stripe = {}
    for i in prog.instructions:
        if i.kind == "kv_write" and i.op == "L0.kv_write":
            region = next(r for r in prog.regions if r.chip == i.chip and r.name == "kv:L0")
            by_stripe.setdefault(i.slice["kv_stripe"], set()).add(region.size_bytes)
    assert by_stripe == {(0, 2): {6 * 20 * per_tok}, (1, 2): {5 * 20 * per_tok}}


@pytest.mark.parametrize("name", ["llama_tiny", "gemma4_tiny"])
def test_one_chip_stage_gate_up_spans_the_intermediate_width(name: str) -> None:
    """tp=1: the fused gate_up instruction covers intermediate columns 0:I (its weight is still both halves)."""
    m = ModelSpec.from_path(DATA / f"{name}.json")
    one = _compile("tp=1,stages=2", Phase.prefill(4), name, chips=2).program
    two = _compile("tp=2,stages=2", Phase.prefill(4), name, chips=4).program
    gu = [i for i in one.instructions if i.op == "L0.gate_up" and i.kind == "matmul"]
    inter = m.layers[0].ffn.intermediate
    assert [i.slice["cols"] for i in gu] == [(0, inter)]
    w_one = sum(r.size_bytes for r in one.regions if r.name == "w:L0.gate_up")
    w_two = sum(r.size_bytes for r in two.regions if r.name == "w:L0.gate_up")
    assert w_one == pytest.approx(w_two, abs=2 * 320)  # same weight bytes, up to vector alignment
