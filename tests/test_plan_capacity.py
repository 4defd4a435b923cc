"""Capacity ceilings: breakdowns sum to what they report; the LPX figures T4-T6 are derived."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lpxsim.catalog import model_names
from lpxsim.core.errors import UserError
from lpxsim.plan.capacity import capacity, require_fit

LPX_CLI = [sys.executable, "-m", "lpxsim.cli.main"]


@pytest.mark.parametrize("name", model_names())
@pytest.mark.parametrize("system", ["lpx", "h200-hgx", "vr-nvl72"])
def test_every_breakdown_sums_to_its_total(name: str, system: str) -> None:
    r = capacity(name, system, context=32_000)  # every catalog model on every one of these systems: no skip
    b = r.breakdown
    assert abs(b.check()) < 1e-3 * b.total_bytes / 1e9
    assert b.kv_bytes == pytest.approx(r.max_streams * r.kv_bytes_per_stream)
    if r.max_streams > 0:
        assert 0 <= b.free_bytes < r.kv_bytes_per_stream  # otherwise one more stream would fit
    else:  # negative free bytes are the shortfall
        assert b.free_bytes < r.kv_bytes_per_stream
    assert b.total_bytes == pytest.approx(r.chips * r.chip_memory_bytes)


def test_gemma4_31b_on_one_lpx_rack_t4_t5_t6() -> None:
    r = capacity("gemma-4-31b", "lpx", context=100_000, weights="fp8")
    assert 31e9 > r.weight_bytes > 30.5e9  # T4: "a bit over 31 GB" (30.70 B params x 1 B)
    assert r.chips_for_weights == 63  # T5 "on the order of 64 LPUs"; docs/validation.md documents 63
    assert r.chips == 256
    # T6 "near ~12": BF16 K+V (V stored on K=V layers) with the sliding windows gives 10.
    assert r.max_streams == 10  # as documented (docs/assumptions.md)
    alt = {(a.kv, a.kv_layout): a.max_streams for a in r.alternatives}
    assert alt[("bf16", "k-once")] > 1.7 * r.max_streams
    assert alt[("fp8", "separate")] > 1.9 * r.max_streams


def test_more_context_never_fits_more_streams() -> None:
    prev = 10**9
    for ctx in (1_000, 10_000, 50_000, 100_000, 200_000):
        n = capacity("gemma-4-31b", "lpx", context=ctx).max_streams
        assert n <= prev
        prev = n


def test_models_that_need_several_racks() -> None:
    ds = capacity("deepseek-v3", "lpx", context=100_000)
    assert ds.max_streams == 0 and ds.units_needed >= 6  # 671 GB FP8 over 128 GB racks
    kimi = capacity("kimi-k2", "lpx", context=100_000)
    assert kimi.units_needed >= 9
    six = capacity("deepseek-v3", "lpx", context=100_000, racks=ds.units_needed)
    assert six.max_streams >= 1
    with pytest.raises(UserError, match="needs"):
        require_fit(ds)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"context": 0}, "context"),
        ({"context": -10}, "context"),
        ({"weights": "fp7"}, "weights"),
        ({"kv": "int3"}, "kv"),
        ({"kv_layout": "weird"}, "kv_layout"),
        ({"racks": 0}, "racks"),
        ({"chips": -1}, "chips"),
    ],
)
def test_bad_input_names_the_field(kwargs: dict, field: str) -> None:
    args = {"context": 10_000} | kwargs
    with pytest.raises(UserError) as e:
        capacity("gemma-4-31b", "lpx", **args)
    assert e.value.field == field


def test_cli_capacity_json_and_errors() -> None:
    res = subprocess.run(
        [*LPX_CLI, "capacity", "gemma-4-31b", "--system", "lpx", "--context", "100000", "--weights", "fp8", "--json"],
        capture_output=True, text=True, check=True,
    )
    d = json.loads(res.stdout)
    assert d["chips_for_weights"] == 63
    assert d["max_streams"] >= 1 and set(d["breakdown"]) >= {"weights_bytes", "kv_bytes", "free_bytes"}
    bad = subprocess.run([*LPX_CLI, "capacity", "gemma-4-31b", "--context", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "context" in bad.stderr
    unknown = subprocess.run([*LPX_CLI, "capacity", "gemma-4-32b"], capture_output=True, text=True)
    assert unknown.returncode == 2 and "gemma-4-31b" in unknown.stderr


def test_a_gpu_capacity_gives_the_engines_ceiling_beside_the_pooled_one() -> None:
    """A new user's audit: `capacity deepseek-r1 --system gb200-nvl72 --context 32256` said 5,067 streams (every
    GPU's memory pooled) where `estimate` admits 396 on the same rack (TP8 replicas keep MLA's latent cache on
    every rank). The engine's own ceiling, at each layout goal, now stands beside the pooled count: the figure
    `estimate --gpus 72 --goal G` runs against."""
    from lpxsim.engine.answer import answer
    from lpxsim.engine.query import Deployment, Load, Objective, Workload

    r = capacity("deepseek-r1", "gb200-nvl72", context=32_256, compiled=True)
    by_goal = {e.goal: e for e in r.engine}
    assert set(by_goal) == {"latency", "throughput"}
    for goal, objective in (("latency", Objective.LATENCY), ("throughput", Objective.THROUGHPUT)):
        a = answer("deepseek-r1", Deployment("gb200-nvl72", 72, given=True), Workload(32_000, 256),
                   Load(concurrency=1), objective)
        assert by_goal[goal].streams == a.kv_ceiling and by_goal[goal].deployment == a.deployment.label()
    assert by_goal["latency"].streams < r.max_streams / 4  # the MLA cache on every tensor-parallel rank
    assert capacity("deepseek-r1", "gb200-nvl72", context=32_256).engine == []  # only when asked
