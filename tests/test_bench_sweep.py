"""Sweeps: grid, executors (serial, processes, threads, Dask on loopback), atomic append and resume."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lpxsim.bench import sweep as sw
from lpxsim.bench.frontier import mark_frontier, pareto_mask
from lpxsim.bench.store import PointStore
from lpxsim.core.errors import UserError
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost

CALLS: list[dict] = []


def toy_point(p: dict) -> dict:
    """Closed form: per-user speed falls and aggregate rises with concurrency; context slows both."""
    conc = p["concurrency"] or 8
    user = 1000.0 / (1 + conc / 16) / (1 + p["context"] / 1e5)
    return {"model": p["model"], "target": p["target"], "context": p["context"], "concurrency": conc,
            "hardware": "toy: 4 chips, 10.0 kW", "fits": True, "tok_s_user": user, "tok_s_total": user * conc,
            "tok_s_per_mw": user * conc / 0.01}


def counting_point(p: dict) -> dict:
    CALLS.append(p)
    return toy_point(p)


class FailOn:
    """Raise on one point, as a crash or a killed worker would, after others finished."""

    def __init__(self, bad_index: int, points: list[dict]):
        self.bad = points[bad_index]

    def __call__(self, p: dict) -> dict:
        if p == self.bad:
            raise RuntimeError("worker died")
        return toy_point(p)


def points():
    return sw.grid("toy-model", ["a", "b"], [10_000, 100_000], [1, 4, 16], osl=128)


def test_grid_covers_targets_contexts_concurrencies_and_ceilings():
    g = points()
    assert len(g) == 2 * 2 * 4
    assert {p["concurrency"] for p in g} == {0, 1, 4, 16}
    with pytest.raises(UserError, match="concurrency"):
        sw.grid("m", ["a"], [1], [-1])


def test_serial_sweep_writes_every_point_and_a_parquet(tmp_path):
    df = sw.run_sweep(points(), tmp_path, executor="serial", evaluate=toy_point, progress=False)
    assert len(df) == 16 and len(list((tmp_path / "points").glob("*.json"))) == 16
    assert not list(tmp_path.rglob("*.tmp"))
    back = pd.read_parquet(tmp_path / "sweep.parquet")
    assert list(back["tok_s_user"]) == list(df["tok_s_user"])
    assert {"context", "concurrency", "hardware", "tok_s_user", "tok_s_total", "on_frontier"} <= set(df.columns)


def test_interrupted_sweep_resumes_and_loses_nothing(tmp_path):
    g = points()
    with pytest.raises(RuntimeError, match="worker died"):
        sw.run_sweep(g, tmp_path, executor="serial", evaluate=FailOn(5, g), progress=False)
    store = PointStore(tmp_path)
    saved = [p for p in g if store.has(p)]
    assert len(saved) == len(g) - 1 and not store.has(g[5])
    CALLS.clear()
    df = sw.run_sweep(g, tmp_path, executor="thread", workers=2, evaluate=counting_point, progress=False)
    assert len(CALLS) == 1 and CALLS[0] == g[5]  # only the missing point was computed
    clean = sw.run_sweep(g, tmp_path / "clean", executor="serial", evaluate=toy_point, progress=False)
    pd.testing.assert_frame_equal(df, clean)


def test_rerun_of_a_finished_sweep_computes_nothing(tmp_path):
    sw.run_sweep(points(), tmp_path, executor="serial", evaluate=toy_point, progress=False)
    CALLS.clear()
    sw.run_sweep(points(), tmp_path, executor="serial", evaluate=counting_point, progress=False)
    assert CALLS == []


def test_process_executor_matches_serial(tmp_path):
    a = sw.run_sweep(points(), tmp_path / "p", executor="process", workers=2, evaluate=toy_point, progress=False)
    b = sw.run_sweep(points(), tmp_path / "s", executor="serial", evaluate=toy_point, progress=False)
    pd.testing.assert_frame_equal(a, b)


def test_dask_local_cluster_on_loopback(tmp_path):
    import distributed  # a hard dependency: missing is a failure, not a skip
    with distributed.LocalCluster(
        host="127.0.0.1", n_workers=1, threads_per_worker=2, processes=False, protocol="tcp://",
        dashboard_address=None,
    ) as cl:
        df = sw.run_sweep(points(), tmp_path, executor="dask", scheduler=cl.scheduler_address,
                          evaluate=toy_point, progress=False)
    ref = sw.run_sweep(points(), tmp_path / "ref", executor="serial", evaluate=toy_point, progress=False)
    pd.testing.assert_frame_equal(df, ref)


def test_dask_without_scheduler_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="scheduler"):
        sw.run_sweep(points(), tmp_path, executor="dask", evaluate=toy_point, progress=False)
    with pytest.raises(UserError, match="executor"):
        sw.run_sweep(points(), tmp_path, executor="mpi", evaluate=toy_point, progress=False)


def test_pareto_mask():
    x = np.array([1.0, 2.0, 3.0, 2.0, np.nan])
    y = np.array([3.0, 2.0, 1.0, 1.0, 9.0])
    assert list(pareto_mask(x, y)) == [True, True, True, False, False]


def test_frontier_is_per_target_and_context():
    df = pd.DataFrame({"target": ["a", "a", "b"], "context": [1, 1, 1], "tok_s_user": [1.0, 2.0, 0.5],
                       "tok_s_total": [1.0, 2.0, 0.5]})
    assert list(mark_frontier(df)["on_frontier"]) == [False, True, True]


class CeilingStep:
    name, chips, power_w = "toy", 8, 20_000.0

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        return StepCost.serial(1e-3 + 1e-5 * batch.size)

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        return StepCost.serial(1e-6 * chunk.tokens)

    def verify(self, batch, k):
        return self.decode_step(batch)

    def kv_capacity_bytes(self):
        return 1e9

    def kv_bytes(self, context):
        return 1e4 * context

    def max_batch(self):
        return 256


def _toy_placed(chips: int = 8, replicas: int = 1):
    from lpxsim.catalog import get_model
    from lpxsim.engine.deployment import Placed
    from lpxsim.engine.query import Deployment

    return Placed(Deployment("lpx", chips, layout="toy", replicas=replicas), CeilingStep(), get_model("gemma-4-31b"), 8)


def test_evaluate_point_uses_the_kv_ceiling(monkeypatch):
    import lpxsim.bench.backends as be

    monkeypatch.setattr(sw, "placed_deployment", lambda p: _toy_placed())
    monkeypatch.setattr(be, "unit_ceiling", lambda *a, **k: (1, 12))
    base = {"model": "m", "target": "toy", "context": 9_000, "osl": 1_000, "weights": "fp8", "kv": "bf16"}
    ceil = sw.evaluate_point({**base, "concurrency": 0})
    assert ceil["kv_ceiling"] == 10 and ceil["concurrency"] == 10 and ceil["fits"] and ceil["at_ceiling"]
    assert ceil["capacity_ceiling"] == 12  # the capacity model's figure, shown beside the replica's
    import lpxsim.engine.answer as engine_answer

    def no_search(*a, **k):  # the sweep shows no bigger deployment, so it searches for none (round 3, 25th session)
        raise AssertionError("the sweep placed a bigger deployment")

    monkeypatch.setattr(engine_answer, "place", no_search)
    over = sw.evaluate_point({**base, "concurrency": 11})
    assert not over["fits"] and math.isnan(over["tok_s_user"]) and over["kv_ceiling"] == 10
    assert "needs" not in over
    one = sw.evaluate_point({**base, "concurrency": 1})
    assert one["tok_s_user"] > ceil["tok_s_user"] and one["tok_s_total"] < ceil["tok_s_total"]
    assert one["hardware"].startswith("8 lpx chips (0.0312 rack, toy)")
    assert "concurrency 1 on" in one["label"] and "OSL 1,000" in one["label"]


def test_a_deployment_with_two_replicas_runs_twice_the_streams(monkeypatch):
    """A rack whose layout fills half of it runs two replicas: twice the ceiling, the same per-user speed at
    one stream per replica, twice the aggregate."""
    import lpxsim.bench.backends as be

    monkeypatch.setattr(be, "unit_ceiling", lambda *a, **k: (1, 12))
    base = {"model": "m", "target": "toy", "context": 9_000, "osl": 1_000, "weights": "fp8", "kv": "bf16"}
    monkeypatch.setattr(sw, "placed_deployment", lambda p: _toy_placed())
    single = sw.evaluate_point({**base, "concurrency": 1})
    monkeypatch.setattr(sw, "placed_deployment", lambda p: _toy_placed(replicas=2))
    double = sw.evaluate_point({**base, "concurrency": 2})
    assert double["kv_ceiling"] == 20
    assert double["tok_s_user"] == pytest.approx(single["tok_s_user"], rel=1e-12)
    assert double["tok_s_total"] == pytest.approx(2 * single["tok_s_total"], rel=1e-12)


def capped_point(p: dict) -> dict:
    """A system whose ceiling is 1 stream: the ceiling point repeats concurrency 1."""
    row = toy_point({**p, "concurrency": p["concurrency"] or 1})
    return {**row, "at_ceiling": p["concurrency"] == 0}


def test_a_ceiling_equal_to_a_requested_concurrency_is_one_row(tmp_path):
    g = sw.grid("m", ["a"], [10_000], [1, 4])
    df = sw.run_sweep(g, tmp_path, executor="serial", evaluate=capped_point, progress=False)
    assert list(df["concurrency"]) == [1, 4]
    assert list(df["at_ceiling"]) == [True, False]


def test_a_context_deployment_is_sized_for_the_most_streams_a_layout_holds(monkeypatch):
    """The largest power of two within the capacity model's ceiling is asked first; halved until the backend
    lays one out; the chips are the deployment's whatever the load."""
    import lpxsim.backends.factory as factory
    from lpxsim.core.errors import DoesNotFit
    from lpxsim.engine import deployment as dp
    from lpxsim.engine.query import Workload

    tries: list = []

    def make(model, system, layout, **kw):
        tries.append(layout)
        if layout.concurrency > 20:
            raise DoesNotFit("layout", f"no layout holds {layout.concurrency}")
        return CeilingStep()

    dp._place.cache_clear()
    monkeypatch.setattr(factory, "make_step_model", make)
    monkeypatch.setattr(dp, "design_streams", lambda *a: 32)
    placed = dp.place("gemma-4-31b", "lpx", Workload(9_000, 1_000))
    assert isinstance(placed.step, CeilingStep) and placed.design_streams == 16
    assert [t.concurrency for t in tries] == [32, 16]
    assert all((t.isl, t.osl, t.racks) == (9_000, 1_000, 1.0) for t in tries)
    assert placed.deployment.replicas == 256 // 8 and placed.deployment.powered_chips == 256
    assert dp.place("gemma-4-31b", "lpx", Workload(9_000, 1_000)) is placed and len(tries) == 2  # built once
    dp._place.cache_clear()


def test_points_of_one_context_are_one_task(tmp_path):
    """A worker builds each (target, context) deployment once: its points travel together."""
    groups = sw._groups(points())
    assert len(groups) == 4 and all(len({(p["target"], p["context"]) for p in g}) == 1 for g in groups)
    assert sum(len(g) for g in groups) == len(points())
