"""Physics guards: no decode or prefill step beats the roofline of its chips, and doubling the chips of a layout
cannot speed a prefill by more than the doubling (docs/validation.md, "Physics guards")."""

from __future__ import annotations

import pytest

from lpxsim.backends.factory import Layout, make_step_model
from lpxsim.catalog import get_model, get_system
from lpxsim.graph import Phase
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost
from lpxsim.step.roofline import check_step, peak_rates, step_work

MODEL = "gemma-4-31b"
CHUNK = 8192  # the serving loop's prefill chunk


def test_the_guard_refuses_a_step_faster_than_its_roofline():
    work = step_work(get_model(MODEL), Phase.prefill(CHUNK, 0))
    peak, bw = peak_rates(get_system("lpx"), 256)
    bound = max(work.flops / peak, work.bytes / bw)
    assert bound == pytest.approx(work.flops / peak)  # a long prefill is compute-bound
    assert check_step(StepCost.serial(bound), work, peak, bw).ok
    assert not check_step(StepCost.serial(0.9 * bound), work, peak, bw).ok
    assert not check_step(StepCost(0.5 * bound, bound), work, peak, bw).ok  # latency below its interval
    # a decode step at batch 1 is bandwidth-bound: every weight byte is read once
    d = step_work(get_model(MODEL), Phase.decode([1024]))
    assert d.bytes / bw > d.flops / peak
    assert not check_step(StepCost.serial(0.99 * d.bytes / bw), d, peak, bw).ok


LPX_FULL = ("lpx", Layout(racks=1, lpx_layout="tp=16,stages=16,kvsplit=4,kvspread=0", isl=10_000))
LPX_HALF_SPREAD = ("lpx", Layout(racks=1, lpx_layout="tp=16,stages=8,kvsplit=4,kvspread=7", isl=10_000))
DEPLOYMENTS = [
    pytest.param(*LPX_FULL, id="lpx-256-chips"),
    pytest.param(*LPX_HALF_SPREAD, id="lpx-128-chips-kvspread", marks=pytest.mark.heavy),
    pytest.param("vr-nvl72", Layout(gpus=4, tp=4, isl=10_000), id="vr-nvl72-tp4"),
    pytest.param("gb200-nvl72", Layout(gpus=8, tp=8, isl=10_000), id="gb200-nvl72-tp8", marks=pytest.mark.heavy),
]
SHAPES = [("decode", 1, 1024), ("decode", 8, 10_000), ("prefill", CHUNK, 0), ("prefill", 2048, CHUNK)]


@pytest.mark.parametrize(("system", "layout"), DEPLOYMENTS)
def test_no_step_beats_the_roofline(system, layout):
    m = get_model(MODEL)
    step = make_step_model(m, system, layout)
    peak, bw = peak_rates(get_system(system), step.chips)
    for kind, a, b in SHAPES:
        if kind == "decode":
            cost, phase = step.decode_step(DecodeBatch.uniform(a, b)), Phase.decode([b] * a)
        else:
            cost, phase = step.prefill(PrefillChunk(a, b)), Phase.prefill(a, b)
        r = check_step(cost, step_work(m, phase), peak, bw)
        assert r.ok, f"{system} {step.chips} chips {kind} {a}@{b}: {r.describe()}"
        assert r.flop_utilisation <= 1.0 and r.bandwidth_utilisation <= 1.0


def _prefill_s(step, isl: int) -> float:
    """Time to prefill `isl` tokens in serving-loop chunks (each chunk's latency: one request alone)."""
    total, done = 0.0, 0
    while done < isl:
        n = min(CHUNK, isl - done)
        total += step.prefill(PrefillChunk(n, done)).latency_s
        done += n
    return total


# 2x the chips can at most halve a prefill: the margin is for the fixed per-step costs that do not shrink with the
# chips (pipeline fill, all-reduce hops), which can only lower the speed-up, plus interpolation round-off.
SPEEDUP_MARGIN = 1.05


@pytest.mark.parametrize("isl", [10_000, pytest.param(100_000, marks=pytest.mark.heavy)])
def test_doubling_the_chips_of_a_layout_at_most_halves_its_prefill(isl):
    m = get_model(MODEL)
    half = make_step_model(m, "lpx", Layout(racks=1, lpx_layout="tp=16,stages=8,kvsplit=4,kvspread=0", isl=isl))
    full = make_step_model(m, "lpx", Layout(racks=1, lpx_layout="tp=16,stages=16,kvsplit=4,kvspread=0", isl=isl))
    assert (half.chips, full.chips) == (128, 256)
    speedup = _prefill_s(half, isl) / _prefill_s(full, isl)
    assert 1.0 < speedup <= 2.0 * SPEEDUP_MARGIN, speedup


# A prefill on a KV-spread layout gathers its helpers' KV stripes to the owner (`lpxsim.lpu.emit_gather`);
# what it still pays over the unspread layout on the same chips is the helpers' sends of their stripes, which
# a stage's interval counts beside its own work (10K on 128 chips: 1.56-1.59x; docs/validation.md, "Physics
# guards"). Before the gather, the query rows went to 15 helpers: 5.4-6.1x.
SPREAD_PREFILL_MAX = 1.65


@pytest.mark.parametrize(("spread", "unspread"), [
    ("tp=8,stages=16,kvsplit=2,kvspread=15", "tp=8,stages=16,kvsplit=2,kvspread=0"),
    pytest.param("tp=16,stages=8,kvsplit=4,kvspread=7", "tp=16,stages=8,kvsplit=4,kvspread=0",
                 marks=pytest.mark.heavy),
])
def test_a_spread_layouts_prefill_is_within_a_stated_factor_of_the_unspread_one(spread, unspread):
    m = get_model(MODEL)
    isl = 10_000
    a = make_step_model(m, "lpx", Layout(racks=1, lpx_layout=spread, isl=isl))
    b = make_step_model(m, "lpx", Layout(racks=1, lpx_layout=unspread, isl=isl))
    assert a.chips == b.chips == 128
    ratio = _prefill_s(a, isl) / _prefill_s(b, isl)
    assert 1.0 <= ratio <= SPREAD_PREFILL_MAX, ratio
