"""Pool keys that reach the detailed backends or the workers: a GPU pool's `memory_fraction` (the KV share
of free HBM, as the engines' free-memory fraction) and a pool's own `max_batch` (issue 12)."""

from __future__ import annotations

import pytest

from analytic_double import use_double
from lpxsim.errors import UserError
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
