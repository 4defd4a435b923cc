"""A value given twice is one question (round 3, twenty-seventh session): a comma list keeps each value once, and a
layout key given twice is refused, naming the field, instead of one of the two being taken silently."""

from __future__ import annotations

import pytest

from lpxsim.core.errors import UserError
from lpxsim.core.inputs import parse_count_list
from lpxsim.engine.deployment import _parse_gpu_layout
from lpxsim.lpu.layout import parse_layout
from lpxsim.plan.modes import ModesQuery


def test_a_count_list_keeps_each_value_once_in_its_first_place():
    assert parse_count_list("32K,1000,32000,1000", "contexts", 1, 10**6) == [32_000, 1_000]


def test_a_modes_query_asks_each_context_load_and_mode_once():
    """`compare_modes` keys each mode's baseline by (context, load): a repeated context made that key's value a
    tuple, and `lpxsim modes --contexts 1000,1000` ended in a traceback."""
    q = ModesQuery("gemma-4-31b", contexts=(1000, 1000, 2000), loads=("1", "light", "1"),
                   modes=("lpx-alone", "lpx-alone"))
    assert (q.contexts, q.loads, q.modes) == ((1000, 2000), ("1", "light"), ("lpx-alone",))


@pytest.mark.parametrize("text", ["tp=16,tp=8", "stages=8,pp=4", "kvsplit=2,kv_seq_split=2", "replicas=1,dp=2"])
def test_an_lpx_layout_key_given_twice_is_refused(text):
    with pytest.raises(UserError) as e:
        parse_layout(text)
    assert e.value.field == "layout" and "twice" in e.value.message


def test_a_gpu_layout_key_given_twice_is_refused():
    with pytest.raises(UserError) as e:
        _parse_gpu_layout("tp=8,ep=2,tp=4")
    assert e.value.field == "layout" and "tp given twice" in e.value.message
    assert _parse_gpu_layout("tp=8,ep=2,dp-attention")["dp_attention"] is True
