"""Pool keys that reach the detailed backends or the workers: a GPU pool's `memory_fraction` (the KV share
of free HBM, as the engines' free-memory fraction) and a pool's own `max_batch` (issue 12)."""

from __future__ import annotations

import pytest

from analytic_double import use_double
from lpxsim.core.errors import UserError
from lpxsim.serving import Simulation, load_fleet, load_workload
from lpxsim.serving.backends import make_step_model
from lpxsim.serving.config import PoolConfig
from serving_fixtures import fleet, pool, synthetic


def test_memory_fraction_is_the_gpu_models_kv_share_of_free_hbm() -> None:
    base = dict(name="p", system="vr-nvl72", backend="gpu", model="llama-3.1-8b", gpus_per_worker=8, tp=8)
    default = make_step_model(PoolConfig(**base))
    half = make_step_model(PoolConfig(**base, memory_fraction=0.45))
    assert half.kv_capacity_bytes() == pytest.approx(default.kv_capacity_bytes() * 0.45 / 0.9, rel=1e-9)
    with pytest.raises(UserError) as e:  # an LPX program places its own KV
        make_step_model(PoolConfig(name="l", system="lpx", model="llama-3.1-8b", memory_fraction=0.5))
    assert e.value.field.endswith("memory_fraction")


def test_a_pools_max_batch_caps_its_workers(monkeypatch) -> None:
    use_double(monkeypatch)
    f = load_fleet(fleet(pool("a", max_batch=3), pool("b"), router={"policy": "round_robin"}))
    sim = Simulation(f, load_workload(synthetic(n=20)), seed=0)
    assert {w.max_batch for w in sim.pools["a"].workers} == {3}
    assert {w.max_batch for w in sim.pools["b"].workers} == {f.scheduler.max_batch}


class _Asked(Exception):
    """Raised by the spy factory below: the Layout was recorded and nothing is compiled."""


def _layout_asked(monkeypatch, build) -> object:
    """The Layout `build()` hands the project factory (lpxsim.backends.factory.make_step_model), without compiling."""
    import lpxsim.backends.factory as backends

    seen = []

    def spy(model, system, layout=None, **kw):
        seen.append(layout)
        raise _Asked

    monkeypatch.setattr(backends, "make_step_model", spy)
    with pytest.raises(_Asked):
        build()
    return seen[0]


@pytest.mark.parametrize("context", [10_000, 100_000])
def test_a_modes_lpx_pool_is_the_sweeps_deployment_of_the_same_workload(monkeypatch, context) -> None:
    """With target_osl an LPX pool asks for the very Layout the engine builds for that workload (racks,
    contexts, power-of-two streams, workload grid) -- the deployment of estimate and sweep -- whatever the
    users, so they all share the layout search and every compiled step."""
    import functools

    from lpxsim.bench.fleets import builtin_fleet
    from lpxsim.engine import deployment
    from lpxsim.engine.query import Workload

    osl = 256
    monkeypatch.setattr(deployment, "_place", functools.lru_cache(maxsize=8)(deployment._place.__wrapped__))
    sweep = _layout_asked(monkeypatch, lambda: deployment.place("gemma-4-31b", "lpx", Workload(context, osl)))
    for mode in ("lpx-alone", "rubin-lpx-pd"):
        f = builtin_fleet(mode, "gemma-4-31b", context=context + osl, users=3, osl=osl)
        lpx = next(p for p in f["pools"] if p["system"] == "lpx")
        assert lpx["target_osl"] == osl
        got = _layout_asked(monkeypatch, lambda lpx=lpx: make_step_model(PoolConfig(**lpx)))
        assert got == sweep and got.workload_grid and got.isl == context and got.osl == osl
    assert sweep.concurrency & (sweep.concurrency - 1) == 0  # a power of two, as the sweep sizes it


def test_only_a_pool_sized_for_a_whole_workload_rounds_its_streams_to_a_power_of_two() -> None:
    from lpxsim.bench.fleets import _streams, builtin_fleet
    from lpxsim.plan.capacity import capacity

    fit = capacity("gemma-4-31b", "lpx", 10_256, racks=1).max_streams
    assert fit & (fit - 1)  # not a power of two: the two rules differ here
    assert _streams("gemma-4-31b", 64, 10_256, racks=1) == min(64, fit)
    assert _streams("gemma-4-31b", 64, 10_256, racks=1, pow2=True) == 1 << (fit.bit_length() - 1)
    assert _streams("gemma-4-31b", 3, 10_256, racks=1, pow2=True) == 1 << (fit.bit_length() - 1)  # users: no part
    plain = builtin_fleet("lpx-alone", "gemma-4-31b", context=10_256, users=64)["pools"][0]
    assert plain["target_concurrency"] == min(64, fit) and "target_osl" not in plain  # plan fleet's sizing


def test_a_pool_without_target_osl_keeps_its_chips_and_generic_grid(monkeypatch) -> None:
    p = PoolConfig(name="l", system="lpx", model="gemma-4-31b", racks_per_worker=1, target_context=10_256)
    got = _layout_asked(monkeypatch, lambda: make_step_model(p))
    assert (got.chips, got.racks, got.isl, got.osl, got.workload_grid) == (256, None, 10_256, None, False)


def test_target_osl_must_be_shorter_than_the_target_context() -> None:
    for extra in ({"target_context": 256, "target_osl": 256}, {"target_osl": 64}):
        p = PoolConfig(name="l", system="lpx", model="gemma-4-31b", racks_per_worker=1, **extra)
        with pytest.raises(UserError) as e:
            make_step_model(p)
        assert e.value.field.endswith("target_osl")


def test_the_one_rack_example_fleet_runs_on_256_chips(monkeypatch) -> None:
    """A fleet's stated deployment is kept (issue 27): `racks_per_worker: 1` is a 256-chip replica, whatever
    the workload (it used to compile a 128-chip layout)."""
    from pathlib import Path

    from lpxsim.serving.backends import chips_per_worker

    f = load_fleet(str(Path(__file__).parents[1] / "examples" / "fleets" / "lpx-alone.yaml"))
    (p,) = f.pools
    assert chips_per_worker(p) == 256
    assert _layout_asked(monkeypatch, lambda: make_step_model(p)).chips == 256
    for ctx in (10_256, 100_256):  # sized for a long or a short context, still the whole rack
        sized = p.model_copy(update={"target_context": ctx})
        assert _layout_asked(monkeypatch, lambda s=sized: make_step_model(s)).chips == 256
