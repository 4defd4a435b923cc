"""Plans that deploy: the fleet a plan describes, written as files `lpxsim simulate` (and `serve`) take unchanged.

`lpxsim plan fleet --emit DIR` and `lpxsim plan point --emit DIR` write into DIR:

- `fleet.yaml`: one pool per (class, system) the plan assigns, `workers` = its replicas, each replica the size
  the plan priced (LPX: `chips_per_worker`, laid out by the same search; GPU: `gpus_per_worker` with the
  TP/EP/PP the plan's layout names), a KV-aware router that sends each request class to its pools.
  It is checked with `serving.config.load_fleet` before it is written.
- `workload-<class>.yaml`: each class's requests (ISL, OSL, its demand as a closed loop or Poisson rate). A
  session workload (the engine's default, `plan point`; a demand class with a session) is written as the
  sessions the answer was computed on (`kind: agentic`: first turn, new tokens a turn, turns, think time,
  drawn exponential around its mean as the engine's own check does), one session in flight per user.
- `dynamo.yaml` (when a plan has GPU pools): a Dynamo-style description of those pools (workers,
  parallelism, router mode), a starting point, not a validated deployment.
- `README.md`: how to simulate it, serve it and measure it with NVIDIA's aiperf.

Every file is written under a temporary name and renamed; DIR that exists as anything but a directory is
refused before any work (`check_emit_dir`).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from pathlib import Path

import yaml

from lpxsim.catalog import get_system
from lpxsim.core.errors import UserError
from lpxsim.core.inputs import check_path, claim_output_dir
from lpxsim.plan.fleet_demand import DemandSpec
from lpxsim.plan.fleet_types import Assignment, FleetPlan
from lpxsim.plan.operating_point import OperatingPoint
from lpxsim.serving.config import load_fleet
from lpxsim.serving.workload import load_workload

MAX_EMITTED_REQUESTS = 20_000  # a workload file's request count: enough for a few closed-loop rounds
MIN_EMITTED_REQUESTS = 200


def check_emit_dir(path: str | Path) -> Path:
    """The --emit directory: it may exist (as a directory) or be created; anything else (an empty path, which
    would mean the current folder, included) is refused."""
    p = check_path(path, "emit")
    if p.exists() and not p.is_dir():
        raise UserError("emit", f"{str(p)!r} exists and is not a directory")
    return claim_output_dir(p, "emit")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "pool"


def _gpu_parallelism(layout: str) -> dict:
    """TP/EP/PP/attention-DP of a GPU layout label ("vr-nvl72 TP4/EP4/DPattn x2 fp8")."""
    out: dict = {}
    for key, pat in (("tp", r"\bTP(\d+)"), ("ep", r"\bEP(\d+)"), ("pp", r"\bPP(\d+)")):
        m = re.search(pat, layout)
        if m:
            out[key] = int(m.group(1))
    if "DPattn" in layout:
        out["dp_attention"] = True
    return out


def _pool(name: str, system: str, model: str, replicas: int, chips: int, layout: str, weights: str, kv: str,
          kv_layout: str, mtp: int = 0, accept: float = 0.0) -> dict:
    """A fleet pool for `replicas` replicas of `chips` chips each, as the plan priced them."""
    s = get_system(system)
    pool: dict = {"name": name, "system": s.name, "model": model, "workers": int(replicas), "weights": weights,
                  "kv": kv, "kv_layout": kv_layout, "role": "aggregated"}
    if s.is_lpu:
        # the plan's LPX replica is the layout search on these chips (`plan.operating_point`): so is this pool's
        pool.update(backend="lpx", chips_per_worker=int(chips))
    else:
        pool.update(backend="gpu", gpus_per_worker=int(chips), **_gpu_parallelism(layout))
    if mtp > 0:
        pool.update(mtp=int(mtp), mtp_accept=float(accept))
    return pool


def _workload(name: str, isl: int, osl: int, klass: str, concurrency: int | None = None,
              rate_per_s: float | None = None) -> dict:
    users = concurrency if concurrency is not None else max(1, math.ceil(rate_per_s or 1.0))
    n = int(min(MAX_EMITTED_REQUESTS, max(MIN_EMITTED_REQUESTS, 4 * users)))
    arrival = ({"process": "closed", "concurrency": int(concurrency)} if concurrency is not None
               else {"process": "poisson", "rate": float(rate_per_s)})
    return {"name": name, "kind": "synthetic", "num_requests": n, "arrival": arrival, "isl": int(isl),
            "osl": int(osl), "classes": [{"name": klass, "weight": 1.0}]}


def _session_workload(name: str, shape, osl: int, klass: str, concurrency: int | None = None,
                      requests_per_s: float | None = None) -> dict:
    """`kind: agentic` sessions of `shape` (`engine.query.SessionShape`): a closed loop of `concurrency` sessions
    in flight (each user starts its next session when one ends) or Poisson sessions at requests_per_s / turns
    (a request is a turn). Enough sessions for a steady state between the start and the drain; prefix units of
    64 tokens (`engine.simulated.CHECK_BLOCK_TOKENS`: a later turn re-prefills little of its cached context,
    as a token-granular radix cache)."""
    from lpxsim.engine.simulated import CHECK_BLOCK_TOKENS

    users = concurrency if concurrency is not None else max(1, math.ceil(requests_per_s or 1.0))
    most = max(1, MAX_EMITTED_REQUESTS // shape.turns)
    sessions = int(min(most, max(4 * users, math.ceil(MIN_EMITTED_REQUESTS / shape.turns))))
    arrival = ({"process": "closed", "concurrency": int(concurrency)} if concurrency is not None
               else {"process": "poisson", "rate": float(requests_per_s) / shape.turns})
    think = ({"kind": "exponential", "mean": float(shape.think_s)} if shape.think_s > 0
             else {"kind": "fixed", "value": 0.0})
    session = {"turns": {"kind": "fixed", "value": shape.turns},
               "first_isl": {"kind": "fixed", "value": shape.first_isl},
               "new_tokens": {"kind": "fixed", "value": shape.new_tokens}, "think_s": think}
    if shape.context_cap is not None:
        session["context_cap"] = shape.context_cap
    return {"name": name, "kind": "agentic", "num_requests": sessions, "arrival": arrival, "session": session,
            "osl": int(osl), "hash_block_tokens": CHECK_BLOCK_TOKENS, "classes": [{"name": klass, "weight": 1.0}]}


def _dynamo(pools: list[dict]) -> dict | None:
    gpu = [p for p in pools if p.get("backend") == "gpu"]
    if not gpu:
        return None
    return {"note": ("STARTING POINT, not a validated deployment: the GPU pools of the lpxsim plan as Dynamo-style "
                     "workers. Check the engine's own flags and memory settings before deploying."),
            "router": {"mode": "kv", "note": "KV-aware routing (overlap-weighted prefill blocks + decode load)"},
            "workers": [{"name": p["name"], "model": p["model"], "system": p["system"], "replicas": p["workers"],
                         "gpus_per_replica": p["gpus_per_worker"], "framework": p.get("framework", "sglang"),
                         "disaggregation": "aggregated",
                         "parallelism": {"tensor_parallel_size": p.get("tp", p["gpus_per_worker"]),
                                         "expert_parallel_size": p.get("ep", 1),
                                         "pipeline_parallel_size": p.get("pp", 1),
                                         "attention_data_parallel": p.get("dp_attention", False)},
                         "precision": {"weights": p["weights"], "kv_cache": p["kv"]}} for p in gpu]}


def _readme(title: str, pools: list[dict], workloads: dict[str, dict], models: dict[str, str], dynamo: bool,
            skipped: list[str]) -> str:
    lines = [f"# {title}", "", "Written by `lpxsim plan ... --emit`: the fleet the plan describes.", "",
             "| pool | system | model | replicas | chips per replica |", "|---|---|---|---:|---:|"]
    for p in pools:
        lines.append(f"| {p['name']} | {p['system']} | {p['model']} | {p['workers']:,} | "
                     f"{p.get('chips_per_worker') or p.get('gpus_per_worker'):,} |")
    lines += ["", "## Simulate it", "", "```bash"]
    lines += [f"lpxsim simulate --fleet fleet.yaml --workload {f}" for f in workloads] + ["```", ""]
    lines += ["## Serve it and measure it with aiperf", "",
              "`lpxsim serve` runs the same simulation behind an OpenAI-compatible endpoint on 127.0.0.1 (its "
              "port: `lpxsim serve --help`); point NVIDIA's `aiperf` (PyPI) at it, one class at a time:", "",
              "```bash", "lpxsim serve --fleet fleet.yaml &"]
    for f, w in workloads.items():
        arr = w["arrival"]
        load = (f"--concurrency {arr['concurrency']}" if arr["process"] == "closed"
                else f"--request-rate {arr['rate']:g}")
        if w["kind"] == "agentic":
            lines.append(f"# {f}: agentic sessions (multi-turn, KV kept between turns); a single-turn synthetic "
                         "aiperf run measures the no-cache loop, not these")
            continue
        lines.append(f"aiperf profile --model {models[f]} --url http://127.0.0.1:PORT --endpoint-type chat "
                     f"--streaming {load} --synthetic-input-tokens-mean {w['isl']} --synthetic-input-tokens-stddev 0 "
                     f"--output-tokens-mean {w['osl']} --output-tokens-stddev 0 --request-count {w['num_requests']}"
                     f"  # {f}")
    lines += ["```", ""]
    if dynamo:
        lines += ["`dynamo.yaml` describes the GPU pools as Dynamo-style workers: a starting point, not a "
                  "validated deployment.", ""]
    for s in skipped:
        lines.append(f"Not emitted: {s}")
    return "\n".join(lines) + "\n"


def _atomic_write_text(path: Path, text: str) -> None:
    """`text` to `path` through a temporary file in the same folder and a rename: absent or complete."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write(target: Path, files: dict[str, str]) -> list[str]:
    from lpxsim.core.outputs import mark_output_dir

    mark_output_dir(target, "emit")
    for name, text in files.items():
        _atomic_write_text(target / name, text)
    return list(files)


def _emit(target: Path, title: str, fleet: dict, workloads: dict[str, dict], skipped: list[str]) -> dict:
    """Check every document as its reader will, then write them all (nothing is written if one fails)."""
    load_fleet(fleet)
    routes = fleet["router"]["classes"]
    model_of = {p["name"]: p["model"] for p in fleet["pools"]}
    models = {f: model_of[routes[w["classes"][0]["name"]][0]] for f, w in workloads.items()}
    return _emit_checked(target, title, fleet, workloads, models, skipped)


def _emit_checked(target: Path, title: str, fleet: dict, workloads: dict[str, dict], models: dict[str, str],
                  skipped: list[str]) -> dict:
    for w in workloads.values():
        load_workload(w)
    dyn = _dynamo(fleet["pools"])
    dump = {"sort_keys": False, "default_flow_style": False}
    files = {"fleet.yaml": f"# {title}\n" + yaml.safe_dump(fleet, **dump)}
    files.update({name: yaml.safe_dump(w, **dump) for name, w in workloads.items()})
    if dyn is not None:
        files["dynamo.yaml"] = "# STARTING POINT: Dynamo-style GPU workers of an lpxsim plan\n" + yaml.safe_dump(dyn, **dump)
    files["README.md"] = _readme(title, fleet["pools"], workloads, models, dyn is not None, skipped)
    return {"dir": str(target), "files": _write(target, files), "skipped": skipped}


def _single_system(a: Assignment) -> bool:
    return a.option in (a.system, f"{a.system}+mtp")


def fleet_config(plan: FleetPlan, demand: DemandSpec) -> tuple[dict, dict[str, dict], list[str]]:
    """(the fleet mapping, the workloads by file name, what could not be emitted) of a feasible plan."""
    if not plan.feasible:
        raise UserError("emit", "the plan is not feasible: there is no fleet to emit")
    classes = {c.name: c for c in demand.classes}
    pools, routes, workloads, skipped = [], {}, {}, []
    for a in plan.assignments:
        rc = classes[a.request_class]
        if not _single_system(a):
            skipped.append(f"{a.replicas} replica(s) of {a.option} for class {a.request_class!r} (a Rubin + LPX mode: "
                           "see `lpxsim modes` and examples/fleets/rubin-lpx-*.yaml)")
            continue
        mtp = rc.mtp if a.option.endswith("+mtp") else 0
        name = _slug(f"{a.request_class}-{a.option}")
        pools.append(_pool(name, a.system, a.model, a.replicas, a.chips // max(1, a.replicas), a.layout,
                           demand.weights, demand.kv, demand.kv_layout, mtp, rc.accept))
        routes.setdefault(a.request_class, []).append(name)
    for cname in routes:
        rc = classes[cname]
        conc = None if rc.requests_per_s is not None else math.ceil(rc.concurrent_sessions or 1)
        shape = rc.session_shape()
        workloads[f"workload-{_slug(cname)}.yaml"] = (
            _workload(cname, rc.isl, rc.osl, cname, conc, rc.requests_per_s) if shape is None
            else _session_workload(cname, shape, rc.osl, cname, conc, rc.requests_per_s))
    if not pools:
        raise UserError("emit", "the plan has no single-system pools to emit (" + "; ".join(skipped) + ")")
    fleet = {"name": "planned-fleet", "description": f"Emitted by lpxsim plan fleet: {len(pools)} pool(s); "
             + plan.straddle_note(), "pools": pools,
             "router": {"policy": "kv", "classes": routes}}
    return fleet, workloads, skipped


def emit_fleet_plan(plan: FleetPlan, demand: DemandSpec, target: Path) -> dict:
    """Write a feasible fleet plan's fleet YAML, workloads, README (and Dynamo-style GPU pools) into `target`."""
    fleet, workloads, skipped = fleet_config(plan, demand)
    return _emit(target, "A fleet planned by lpxsim plan fleet", fleet, workloads, skipped)


def emit_operating_point(op: OperatingPoint, target: Path, kv_layout: str = "separate", session=None) -> dict:
    """Write one replica of a feasible operating point as a fleet, with a closed-loop workload at its
    concurrency, into `target`: `session` (the `engine.query.SessionShape` the point was computed on) writes
    its sessions, one in flight per user (`_session_workload`); None the no-cache loop."""
    if not op.feasible:
        raise UserError("emit", f"no operating point to emit: {op.reason}")
    klass = "point"
    name = _slug(f"{op.model}-{op.system}")
    mtp = op.spec_k if op.spec_k else 0
    pool = _pool(name, op.system, op.model, 1, op.replica_chips, op.layout, op.weights, op.kv, kv_layout, mtp,
                 op.spec_accept)
    fleet = {"name": "planned-point", "description": (
        f"Emitted by lpxsim plan point: one replica of {op.model} on {op.system} at concurrency {op.concurrency} "
        f"({op.tok_s_user:,.0f} tok/s/user at ISL {op.isl:,}, OSL {op.osl:,})"), "pools": [pool],
        "router": {"policy": "kv", "classes": {klass: [name]}}}
    if session is not None:
        workloads = {"workload-point.yaml": _session_workload(klass, session, op.osl, klass, op.concurrency)}
        skipped = []
    else:
        workloads = {"workload-point.yaml": _workload(klass, op.isl, op.osl, klass, op.concurrency)}
        skipped = [] if op.new_tokens in (0, op.isl) else [
            f"the point prefills {op.new_tokens:,} of {op.isl:,} input tokens (prefix cache) without a session "
            "shape: the workload prefills all"]
    return _emit(target, f"{op.model} on {op.system}: the plan point", fleet, workloads, skipped)
