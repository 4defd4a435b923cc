"""Inputs read as their user meant them (round 3, twenty-seventh session): a comma list keeps each value once; a
layout key given twice is refused, naming the field, instead of one of the two being taken silently; a context
past the model's window is answered with a note saying so."""

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


def test_a_context_past_the_models_window_is_noted_by_every_answer():
    """`estimate`, `plan point`, `capacity` and `model` at a context past max_position_embeddings: the figures
    stand (the hardware's), and each says the model serves no request that long (estimate and plan point had said
    nothing)."""
    import json

    from fuzz_harness import invoke

    note = "exceeds llama-2-7b's max_position_embeddings 4,096"
    for argv in (["estimate", "llama-2-7b", "--system", "h200-hgx", "--isl", "5000", "--osl", "100", "--json"],
                 ["plan", "point", "llama-2-7b", "--system", "h200-hgx", "--context", "5000", "--target-tok-s-user",
                  "50", "--json"],
                 ["capacity", "llama-2-7b", "--system", "h200-hgx", "--context", "5000", "--json"],
                 ["model", "llama-2-7b", "--context", "5000", "--json"]):
        o = invoke(argv)
        assert o.code == 0, (argv, o.stderr)
        assert any(note in n for n in json.loads(o.stdout)["notes"]), (argv, o.stdout[:300])
    within = invoke(["estimate", "llama-2-7b", "--system", "h200-hgx", "--isl", "3000", "--osl", "100", "--json"])
    assert not any("max_position_embeddings" in n for n in json.loads(within.stdout)["notes"])


def test_an_error_names_the_option_the_user_typed():
    from fuzz_harness import invoke

    o = invoke(["tour", "--moe-model", "abc"])
    assert o.code == 2 and o.stderr.startswith("error: moe-model: unknown model 'abc'"), o.stderr
    o = invoke(["system", "vr-nvl72", "--topology", "trays-32x8"])
    assert o.code == 2 and "no variants" in o.stderr and not o.stderr.rstrip().endswith("one of"), o.stderr


@pytest.mark.parametrize(("change", "field"), [
    ({"model_type": "bert"}, "config.model_type"),  # an encoder's config.json has every field a decoder's has
    ({"hidden_size": 65, "num_attention_heads": 8}, "config.hidden_size"),  # heads cannot split 65
])
def test_a_config_no_decoder_was_built_from_is_refused_by_every_command(tmp_path, change, field):
    """`model`, `capacity`, `compile` and `estimate` had taken these (head_dim 8, rounded down); `emulate` had
    refused them through transformers."""
    import json
    from pathlib import Path

    from fuzz_harness import invoke

    cfg = json.loads((Path(__file__).parent / "data" / "emulate" / "llama_tiny.json").read_text())
    cfg.pop("head_dim", None)
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**cfg, **change}))
    for argv in (["model", str(p)], ["capacity", str(p), "--context", "64"], ["estimate", str(p)]):
        o = invoke(argv)
        assert o.code == 2 and o.stderr.startswith(f"error: {field}:"), (argv, o.stderr)
