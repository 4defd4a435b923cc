"""Context x concurrency sweeps: tok/s per user vs aggregate tok/s and tok/s per MW, per system and mode.

A sweep is a list of points (plain dicts of parameters). Each point is evaluated
on a `concurrent.futures` executor (local processes by default, threads, or a Dask
cluster through `distributed.Client(address).get_executor()`), and every finished
point is written atomically to the results directory, so an interrupted sweep
rerun with the same directory computes only what is missing.

Concurrency 0 in a point means "at this system's KV ceiling at this context":
the largest number of streams whose KV fits next to the weights in the replica
(`kv_ceiling`; `capacity_ceiling` is the memory capacity model's figure for the
same units, for comparison). Every point at one context runs on a deployment sized
for that context (the engine's default: `engine.deployment.place`); the frontier is drawn over every
deployment of a system at a context (`DEPLOYMENTS`), so it is the Pareto set over layouts.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from lpxsim.bench.frontier import mark_frontier
from lpxsim.bench.store import PointStore, atomic_write_parquet, atomic_write_text
from lpxsim.core.errors import UserError
from lpxsim.engine.query import DEFAULT_OSL  # one output length everywhere

EXECUTORS = ("process", "thread", "dask", "serial")
SORT_KEYS = ["model", "target", "context", "concurrency"]
DEPLOYMENT_KEYS = ("goal", "replica_chips")  # what tells two deployments of one system and context apart
# The deployments a system is swept on. GPUs: the layout search's latency and throughput picks, always. LPX:
# "picks" (the default) -- the rack's own layout and one replica of every size of the search's ladder below the
# rack (`engine.layouts.lpx_sizes`) tiled over the rack, each size priced only where the screen finds it can
# reach the frontier (`bench.screen`: each size priced costs its compiles on a cold cache); "all" -- every size
# priced, unscreened; "rack" -- the rack's own layout only.
DEPLOYMENTS = ("picks", "all", "rack")


def grid(model: str, targets: Iterable[str], contexts: Iterable[int], concurrencies: Iterable[int],
         osl: int = DEFAULT_OSL, weights: str = "fp8", kv: str = "bf16", ceiling: bool = True,
         framework: str = "sglang", session: str = "agentic", deployments: str = "picks") -> list[dict]:
    """Every (target, context, concurrency) point, plus one at each system's KV ceiling when `ceiling`
    (fleets have no single ceiling: their simulation rejects what does not fit). `framework`: the
    serving engine of GPU systems (a point names it only when it is not the default, sglang, so that
    earlier sweeps' stored points stay valid). `session`: the workload (`engine.query.session_for`): "agentic",
    the default session at each context (concurrency counts sessions), or "none", the no-cache loop; every
    point names it, so a stored point of one is never read as the other. `deployments`: which deployments
    of each system (`DEPLOYMENTS`)."""
    from lpxsim.engine.query import session_for

    session_for(session, 1, 1)  # an unknown name: one-line error before any work
    from lpxsim.bench.fleets import is_fleet
    from lpxsim.gpu.engine import framework_name

    concs = sorted(set(concurrencies))
    for c in concs:
        if c <= 0:
            raise UserError("concurrency", f"expected positive integers, got {c}")
    if deployments not in DEPLOYMENTS:
        raise UserError("deployments", f"expected one of {', '.join(DEPLOYMENTS)}, got {deployments!r}")
    fw = framework_name(framework)
    extra = {} if fw == "sglang" else {"framework": fw}
    return [
        {"model": model, "target": t, "context": int(ctx), "concurrency": int(c), "osl": int(osl),
         "weights": weights, "kv": kv, "session": session, **extra, **dep}
        for t in targets for ctx in sorted(set(contexts))
        for dep in _deployments(model, t, int(ctx) + int(osl), weights, kv, deployments)
        for c in concs + ([0] if ceiling and not is_fleet(t) else [])
    ]


def _deployments(model: str, target: str, context: int, weights: str, kv: str, which: str) -> list[dict]:
    """The deployments a system is swept on at a context (`DEPLOYMENTS`): on GPUs the layout search's latency
    pick (laid out for one stream) and its throughput pick (for the most streams that fit); on LPX the rack's
    layout (the most streams that fit) and, unless "rack", one replica of each smaller size of the search's
    ladder tiled over the rack (`replica_chips`; "picks" screens them in `run_sweep`)."""
    from lpxsim.catalog import get_model, get_system

    try:
        s = get_system(target)
    except UserError:  # a fleet, or a test's stand-in name
        return [{}]
    if not s.is_lpu and not s.is_wafer:
        return [{"goal": "latency"}, {"goal": "throughput"}]
    if not s.is_lpu or which == "rack":
        return [{}]
    from lpxsim.engine.layouts import lpx_sizes

    try:
        sizes = lpx_sizes(get_model(model), s, context, weights, kv, "separate")
    except UserError:
        return [{}]
    return [{}] + [{"replica_chips": n} for n in sizes if n < s.chips_per_unit]


def rack_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of each system's own deployment at a context (LPX: the rack's layout, not a smaller replica size
    tiled over it; GPUs: both layout picks): what a table quoting "the deployment for this context" reads."""
    return df[df["replica_chips"].isna()] if "replica_chips" in df.columns else df


def placed_deployment(p: dict[str, Any]):
    """The deployment a sweep point at this (system, context) runs on: the engine's default deployment for the
    workload (`engine.deployment.place`), shared by every concurrency of the context."""
    from lpxsim.bench.backends import BackendUnavailable
    from lpxsim.engine.deployment import Precision, place
    from lpxsim.engine.query import Workload

    try:
        wl, prec = Workload(p["context"], p["osl"]), Precision(p["weights"], p["kv"])
        if "replica_chips" in p:
            from lpxsim.engine.layouts import tiled

            return tiled(p["model"], p["target"], wl, int(p["replica_chips"]), prec)
        return place(p["model"], p["target"], wl, None, prec, framework=p.get("framework", "sglang"),
                     goal=p.get("goal", "latency"))
    except ImportError as e:
        raise BackendUnavailable("system", f"the backend for {p['target']} is not available in this build: {e}") from None


def point_workload(p: dict[str, Any]):
    """The engine workload of a sweep point: its context and OSL, and its session ("none" for a point stored
    before sweeps named one: those were the no-cache loop)."""
    from lpxsim.engine.query import Workload, session_for

    return Workload(p["context"], p["osl"], session_for(p.get("session", "none"), p["context"], p["osl"]))


def evaluate_point(p: dict[str, Any]) -> dict[str, Any]:
    """One sweep point: the engine's answer (tok/s per user, aggregate, per MW) for a system, or a fleet's
    simulation. Every row carries its labels (workload, load, deployment and power)."""
    from lpxsim.bench.fleets import is_fleet

    if is_fleet(p["target"]):
        return evaluate_fleet_point(p)
    from lpxsim.bench.backends import unit_ceiling
    from lpxsim.engine.answer import answer_on, ceiling_for
    from lpxsim.engine.query import Load

    placed = placed_deployment(p)
    wl = point_workload(p)
    ceiling = ceiling_for(placed.step, wl) * placed.deployment.replicas  # sessions held, or streams
    conc = ceiling if p["concurrency"] == 0 else p["concurrency"]
    _, unit_streams = unit_ceiling(p["model"], p["target"], wl.context, p["weights"], p["kv"])
    dep = placed.deployment
    row = {**{k: p[k] for k in ("model", "target", "context", "osl", "weights", "kv", "framework", *DEPLOYMENT_KEYS)
              if k in p},
           "concurrency": conc, "at_ceiling": p["concurrency"] == 0, "kv_ceiling": ceiling,
           "capacity_ceiling": unit_streams, "hardware": dep.label(), "chips": dep.powered_chips,
           "power_kw": dep.power_w / 1e3, "layout": dep.layout, "replicas": dep.replicas,
           "session": wl.session.label() if wl.session else "no prefix reuse",
           "session_kind": "agentic" if wl.session else "none"}
    if conc < 1:
        return {**row, "fits": False, "tok_s_user": math.nan, "tok_s_total": math.nan,
                "tok_s_per_mw": math.nan, "ttft_s": math.nan, "tpot_s": math.nan}
    # a row over the ceiling is marked so (its `kv_ceiling`); the bigger deployment is `estimate`'s advice, whose
    # search (layout searches, on LPX compiles at several rack counts) the sweep would pay for and never show
    a = answer_on(placed, wl, Load(concurrency=conc), advise=False)
    fits = not a.over_capacity
    nan = math.nan
    return {**row, "fits": fits, "tok_s_user": a.tok_s_user if fits else nan,
            "tok_s_total": a.tok_s_total if fits else nan, "tok_s_per_mw": a.tok_s_per_mw if fits else nan,
            "ttft_s": a.ttft_s if fits else nan, "tpot_s": a.tpot_s if fits else nan,
            "label": a.label(), "solver": a.solver, "streams_decoding": a.streams_decoding,
            "ttft_first_turn_s": a.ttft_first_turn_s,
            **(a.bands() if fits else {})}  # the answer's error band (cost_path, band, tok_s_user_low/high, ...)


def kv_ceiling(step, context: int) -> int:
    """Streams of `context` tokens whose KV fits the replica, capped by its largest batch (the engine's)."""
    from lpxsim.engine.answer import kv_ceiling as ceiling

    return ceiling(step, context)


FLEET_REQUESTS_PER_USER = 4  # closed-loop requests per user in a fleet point: enough to pass the ramp-up


def evaluate_fleet_point(p: dict[str, Any]) -> dict[str, Any]:
    """A sweep point on a fleet: the serving simulator with `concurrency` closed-loop users."""
    from lpxsim.bench.fleets import closed_workload, fleet_for, fleet_hardware, simulate_fleet

    ewl = point_workload(p)
    base = {**{k: p[k] for k in ("model", "target", "context", "osl", "weights", "kv")}, "at_ceiling": False,
            "kv_ceiling": math.nan, "session": ewl.session.label() if ewl.session else "no prefix reuse",
            "session_kind": "agentic" if ewl.session else "none"}
    conc = p["concurrency"]
    if conc == 0:  # a fleet's ceiling is what its simulation rejects, not one number: no ceiling point
        return {**base, "concurrency": 0, "fits": False, "error": "no single KV ceiling for a fleet",
                "tok_s_user": math.nan, "tok_s_total": math.nan, "tok_s_per_mw": math.nan}
    if ewl.session is None:
        wl = closed_workload(f"sweep-{p['context']}-{conc}", p["context"], p["osl"], conc,
                             max(16, FLEET_REQUESTS_PER_USER * conc))
    else:  # one agent session per user, the engine's shape; the per-user figures are its later turns
        from lpxsim.engine.simulated import SESSION_TURNS, sim_workload

        wl = sim_workload(ewl, conc, SESSION_TURNS, f"sweep-{p['context']}-{conc}")
    res = simulate_fleet(fleet_for(p["target"], p["model"]), wl)
    s = res.summary
    fits = s["completed"] > 0 and s["rejected"] == 0
    return {**base, "concurrency": conc, "hardware": fleet_hardware(res), "chips": int(res.pools["chips"].sum()),
            "power_kw": s["power_w"] / 1e3, "fits": fits, "tok_s_user": _p50(res, ewl, "tok_s_user"),
            "tok_s_total": s["fleet_tok_s"], "tok_s_per_mw": s["tok_s_per_mw"],
            "ttft_s": _p50(res, ewl, "ttft_s"), "tpot_s": _p50(res, ewl, "tpot_s")}


def _p50(res, wl, col: str) -> float:
    """The run's P50 of `col`: over every request, or for sessions over their later turns (the engine's answer)."""
    if wl.session is None:
        return res.summary[col].get("p50", math.nan)
    from lpxsim.engine.simulated import later_turns

    done = later_turns(res.requests[res.requests["status"] == "completed"])
    vals = done[col].to_numpy(dtype=float)
    vals = vals[vals == vals]
    return float(pd.Series(vals).median()) if len(vals) else math.nan


class _SerialExecutor(cf.Executor):
    """Runs each task at submit time (deterministic order; used by tests and tiny sweeps)."""

    def submit(self, fn, /, *args, **kwargs):
        f: cf.Future = cf.Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:  # handed to the caller through the future
            f.set_exception(e)
        return f


@contextmanager
def make_executor(kind: str | cf.Executor = "process", workers: int | None = None, scheduler: str | None = None):
    """A concurrent.futures executor: local processes, threads, serial, or a Dask cluster (or the
    caller's own executor, used as is and left open)."""
    if isinstance(kind, cf.Executor):
        yield kind
        return
    if kind not in EXECUTORS:
        raise UserError("executor", f"expected one of {', '.join(EXECUTORS)}, got {kind!r}")
    if kind == "dask":
        if not scheduler:
            raise UserError("scheduler", "--executor dask needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786)")
        from lpxsim.bench.dask_check import check_scheduler

        address = check_scheduler(scheduler)  # malformed, unreachable or not Dask: one line, bounded in time
        from distributed import Client

        try:
            client = Client(address, timeout="10s")
        except (OSError, ValueError, TypeError) as e:  # TimeoutError, CommClosedError: OSErrors; TLS unset: TypeError
            raise UserError("scheduler", f"cannot reach a Dask scheduler at {address!r}: {e}") from None
        try:
            yield client.get_executor()
        finally:
            client.close()
        return
    if kind == "serial":
        yield _SerialExecutor()
        return
    if workers is not None:
        from lpxsim.core.inputs import check_jobs

        check_jobs(workers, "workers")
    if kind == "process":
        from lpxsim.bench.workers import process_pool

        pool: cf.Executor = process_pool(workers)  # workers die with this process, even on SIGKILL
    else:
        pool = cf.ThreadPoolExecutor(max_workers=workers)
    with pool as ex:
        yield ex


def run_sweep(points: list[dict], out: str | Path, executor: str | cf.Executor = "process",
              workers: int | None = None, scheduler: str | None = None,
              evaluate: Callable[[dict], dict] = evaluate_point, progress: bool = True,
              screen: bool = True) -> pd.DataFrame:
    """Evaluate every point not already in `out`, appending each as it finishes; return all rows.

    Points of one (target, context) are one task (they share a deployment, so a worker builds it once).
    A point that fails with a UserError (e.g. the model does not fit) becomes a row with its error;
    any other exception stops the sweep after the finished points were saved, and is re-raised.
    With `screen`, the LPX replica sizes that cannot reach the frontier are not priced (`bench.screen`); the
    table's `attrs["screened"]` (and `out/screened.json`) say which and why.
    """
    store = PointStore(out)
    screened: list[str] = []
    if screen:
        from lpxsim.bench.screen import screen_sizes

        points, dropped = screen_sizes(points, store, evaluate)
        screened = [d.reason() for d in dropped]
    pending = [p for p in points if not store.has(p)]
    with make_executor(executor, workers, scheduler) as ex, _progress(progress, len(points)) as bar:
        bar(len(points) - len(pending))
        futures = {ex.submit(_guarded_group, evaluate, g): g for g in _groups(pending)}
        failure = _drain(futures, store, bar)
    if failure is not None:
        raise failure
    df = collect(store, points)
    from lpxsim.core.outputs import mark_output_dir

    mark_output_dir(out)
    atomic_write_parquet(Path(out) / "sweep.parquet", df)
    atomic_write_text(Path(out) / "screened.json", json.dumps(screened, indent=1))
    df.attrs["screened"] = screened
    return df


def _drain(futures: dict, store: PointStore, bar: Callable[[int], None]) -> BaseException | None:
    """Save every point as it finishes. After a failure, cancel what has not started, keep saving
    what finishes, and return the first failure (so nothing already computed is lost)."""
    failure: BaseException | None = None
    try:
        for fut in cf.as_completed(futures):
            if fut.cancelled():
                continue
            exc = fut.exception()
            rows, exc = fut.result() if exc is None else ([], exc)
            done = [(p, row) for p, row in zip(futures[fut], rows, strict=False) if row is not None]
            for p, row in done:
                store.save(p, row)
            bar(len(done))
            if exc is not None and failure is None:
                failure = exc
                for f in futures:
                    f.cancel()
    except BaseException:  # e.g. Ctrl-C: stop submitting; saved points stay saved
        for f in futures:
            f.cancel()
        raise
    return failure


def _groups(points: list[dict]) -> list[list[dict]]:
    """Points grouped by (target, deployment, context), in first-seen order."""
    groups: dict[tuple, list[dict]] = {}
    for p in points:
        groups.setdefault((p.get("target"), *(p.get(k) for k in DEPLOYMENT_KEYS), p.get("context")), []).append(p)
    return list(groups.values())


def _guarded_group(evaluate: Callable[[dict], dict],
                   group: list[dict]) -> tuple[list[dict | None], BaseException | None]:
    """Rows of the group's points in order (None for a point that failed) and the first failure. The
    points are independent, so one failure does not lose the others' rows."""
    rows: list[dict | None] = []
    failure: BaseException | None = None
    for p in group:
        try:
            rows.append(point_row(evaluate, p))
        except Exception as e:  # BackendUnavailable or a bug: raised after the group's rows are saved
            failure = failure or e
            rows.append(None)
    return rows, failure


def point_row(evaluate: Callable[[dict], dict], p: dict) -> dict:
    """`evaluate(p)`, or the point's refusal as a row (`fits` False, the error) where the engine says it does
    not fit; a backend that is unavailable stops the sweep instead (not a property of the point)."""
    from lpxsim.bench.backends import BackendUnavailable

    try:
        return evaluate(p)
    except BackendUnavailable:  # not a property of this point: stop the sweep and say so
        raise
    except UserError as e:
        return {**p, "fits": False, "error": str(e)}


def collect(store: PointStore, points: list[dict]) -> pd.DataFrame:
    """The rows of `points` from the store, sorted, with the interactivity/throughput frontier marked."""
    df = pd.DataFrame([store.load(p)["row"] for p in points if store.has(p)])
    if df.empty:
        return df
    if "at_ceiling" in df:  # a ceiling that equals a requested concurrency: keep one row, flagged as the ceiling
        df = df.sort_values("at_ceiling", ascending=False, kind="stable")
        df = df.drop_duplicates([k for k in (*SORT_KEYS, "osl", "weights", "kv", "framework", *DEPLOYMENT_KEYS)
                                 if k in df.columns])
    df = df.sort_values([k for k in (*SORT_KEYS[:3], *DEPLOYMENT_KEYS, SORT_KEYS[3]) if k in df.columns],
                        kind="stable").reset_index(drop=True)
    # per system and context, over every deployment: vs aggregate tok/s and vs tok/s per MW
    return mark_frontier(mark_frontier(df, y="tok_s_per_mw", column="on_frontier_mw"))


@contextmanager
def _progress(enabled: bool, total: int):
    """A rich progress bar on stderr (`lpxsim.core.progress`: only at a terminal); yields `advance(n)`."""
    if not enabled:
        yield lambda n: None
        return
    from lpxsim.core.progress import bar  # only at a terminal, never under --json

    with bar("sweep", total=total) as tick:
        yield tick.advance
