"""Capacity equals the compiler: "does it fit, and how many streams" at the context asked, never a bucket.

The pooled count (`plan.capacity`) and the compiled layout's per-chip ceiling (`plan.compiled_capacity`) are
both given; where they differ, the stated reason (the fullest chip's weights and KV against the averages) must
account for the whole gap, and the compiler must accept the ceiling it reports and refuse one stream more.
"""

from __future__ import annotations

import math

import pytest

from lpxsim.catalog import get_model, get_system
from lpxsim.lpu.arch import arch_for
from lpxsim.lpu.compiler import Target
from lpxsim.lpu.partition import RESERVE_FRACTION, choose_layout
from lpxsim.lpu.stepmodel import LpxStepModel
from lpxsim.plan.capacity import LPU_BUFFER_FRACTION, capacity

# the default suite runs one dense and one MoE case; the heavy job all four (~4 CPU-s each, cold)
CASES = [("gemma-4-31b", 10_000), pytest.param("gemma-4-31b", 100_000, marks=pytest.mark.heavy),
         pytest.param("gpt-oss-120b", 10_000, marks=pytest.mark.heavy), ("gpt-oss-120b", 100_000)]


def test_the_search_and_the_capacity_model_keep_one_reserve():
    assert RESERVE_FRACTION == LPU_BUFFER_FRACTION


@pytest.mark.parametrize(("model", "context"), CASES)
def test_compiled_ceiling_is_the_pooled_one_less_the_fullest_chip(model, context):
    r = capacity(model, "lpx", context, racks=1, compiled=True)
    c = r.compiled
    assert c is not None and r.compiled_streams == c.streams
    assert 1 <= c.streams <= r.max_streams, (c.streams, r.max_streams)  # per chip is never better than pooled
    sram = float(get_system("lpx").chip.memory_bytes)
    usable = sram * (1.0 - RESERVE_FRACTION)
    # the reason is the whole gap: the pooled formula on the averages gives the pooled count, on the fullest
    # chip's own weights and KV the compiled one
    n = r.chips
    assert math.floor((usable - r.weight_bytes / n) / (r.kv_bytes_per_stream / n) + 1e-9) == r.max_streams
    assert math.floor((usable - c.fullest_chip_weights_bytes) / c.kv_bytes_per_stream_on_fullest + 1e-9) == c.streams
    if c.streams < r.max_streams:
        assert f"{c.streams} stream(s)" in c.reason and f"pooled count's {r.max_streams}" in c.reason
        assert sum(n.startswith("compiled:") for n in r.notes) == 1  # said once
    else:
        assert c.reason == ""


@pytest.mark.parametrize(("model", "context"), CASES)
def test_the_compiler_holds_the_ceiling_at_the_context_asked_and_not_one_stream_more(model, context):
    r = capacity(model, "lpx", context, racks=1, compiled=True)
    c = r.compiled
    step = LpxStepModel(model, "lpx", racks=1, layout=c.layout, context=context, concurrency=c.streams)
    assert step.stream_ceiling(context)["streams"] == c.streams
    m, s = get_model(model), get_system("lpx")
    more = choose_layout(m, s, arch_for(s), 256, Target(context, c.streams + 1), "fp8", "bf16", "separate",
                         {"replicas": 1})[0]
    assert more == []


def test_gpt_oss_at_100k_fits_the_one_rack_capacity_says_it_does():
    """Measured before: capacity said one rack holds 2 streams, the compiler that no layout fits one rack."""
    assert capacity("gpt-oss-120b", "lpx", 100_000, racks=1).max_streams >= 1
    step = LpxStepModel("gpt-oss-120b", "lpx", racks=1, context=100_000)
    assert step.n_chips == 256 and step.target.context == 100_000
    assert step.stream_ceiling(100_000)["streams"] >= 1
