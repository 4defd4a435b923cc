"""`serving.prepare.prepare_shapes`: compiling an LPX deployment's step shapes before a run leaves the run
nothing to compile (the benchmark of issue 27 times runs on a prepared deployment)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lpxsim.core.errors import UserError
from lpxsim.serving import simulate
from lpxsim.serving.config import load_fleet
from lpxsim.serving.prepare import prepare_shapes, shape_contexts
from lpxsim.serving.workload import load_workload

TINY = str(Path(__file__).parent / "data" / "emulate" / "llama_tiny.json")  # 512-token window


def _fleet(chips: int):
    return load_fleet({"name": "tiny", "pools": [
        {"name": "lpx", "system": "lpx", "model": TINY, "workers": 2, "chips_per_worker": chips},
        {"name": "gpu", "system": "b200-hgx", "model": "gemma-4-31b", "workers": 1, "gpus_per_worker": 8}]})


def _sessions():
    return load_workload({
        "name": "tiny-sessions", "kind": "agentic", "num_requests": 30,
        "arrival": {"process": "poisson", "rate": 5.0},
        "session": {"turns": 6, "first_isl": 64, "new_tokens": {"kind": "uniform", "low": 10, "high": 60},
                    "think_s": {"kind": "exponential", "mean": 0.5}, "context_cap": 400},
        "osl": {"kind": "uniform", "low": 4, "high": 16}})


@pytest.fixture
def compiles(monkeypatch):
    """How many LPX programs are compiled (`LpxStepModel._build` calls) from here on."""
    from lpxsim.lpu import stepmodel

    count = {"n": 0}
    build = stepmodel.LpxStepModel._build

    def counted(self, *args, **kwargs):
        count["n"] += 1
        return build(self, *args, **kwargs)

    monkeypatch.setattr(stepmodel.LpxStepModel, "_build", counted)
    return count


def test_a_prepared_deployment_compiles_nothing_during_a_run(fresh_cache, compiles):
    fleet = _fleet(8)
    asked = prepare_shapes(fleet, 448, max_sequences=4)
    # one LPX pool: 9 prefill row sizes x 4 sequences, and at least decode batches 1-4, at each context
    assert asked >= len(shape_contexts(448)) * (4 * 9 + 4)
    assert compiles["n"] > 0
    compiles["n"] = 0
    res = simulate(fleet, _sessions(), seed=3)
    assert res.summary["completed"] == res.summary["requests"] > 0
    assert compiles["n"] == 0


def test_an_unprepared_run_compiles_its_shapes(fresh_cache, compiles):
    # the same run on a replica nothing prepared (another size, so no step model is shared): the run compiles
    res = simulate(_fleet(4), _sessions(), seed=3)
    assert res.summary["completed"] == res.summary["requests"] > 0
    assert compiles["n"] > 0


def test_shape_contexts_cover_every_grid_bracket():
    c = shape_contexts(100_400)
    assert c[0] == 0 and c[-1] == 100_400 and c == sorted(set(c))
    for lo, hi in ((0, 1024), (1024, 4096), (4096, 16384), (16384, 32768), (32768, 65536), (65536, 131072)):
        assert any(lo < x < hi for x in c), (lo, hi)


@pytest.mark.parametrize(("field", "kw"), [("max_context", {"max_context": 0}),
                                           ("max_sequences", {"max_context": 100, "max_sequences": 0}),
                                           ("max_decode_batch", {"max_decode_batch": 0})])
def test_bad_limits_name_their_field(field, kw):
    with pytest.raises(UserError) as e:
        prepare_shapes(_fleet(8), **kw)
    assert e.value.field == field


def test_simulate_prepare_flag_reports_the_shapes_and_the_run_compiles_none(fresh_cache, compiles, tmp_path):
    import yaml

    from fuzz_harness import check, invoke

    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump({"name": "tiny", "pools": [
        {"name": "lpx", "system": "lpx", "model": TINY, "workers": 1, "chips_per_worker": 6}]}))
    workload = tmp_path / "sessions.yaml"
    workload.write_text(yaml.safe_dump(_sessions().model_dump(mode="json", exclude_none=True)))
    o = invoke(["simulate", "--fleet", str(fleet), "--workload", str(workload), "--prepare", "--json"])
    check(o)
    assert o.code == 0, o.stderr
    import json

    got = json.loads(o.stdout)
    assert got["prepared_shapes"] > 0 and got["summary"]["completed"] == got["summary"]["requests"] > 0
    prepared = compiles["n"]
    assert prepared > 0
    o = invoke(["simulate", "--fleet", str(fleet), "--workload", str(workload), "--seed", "9", "--json"])
    assert o.code == 0, o.stderr
    assert compiles["n"] == prepared  # a run of another seed on the prepared deployment compiles nothing
