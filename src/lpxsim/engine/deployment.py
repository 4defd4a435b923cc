"""Deployment sizing: the one place a question's hardware becomes a replica's StepModel.

A deployment the user gives (`--racks`, `--chips`, `--gpus`/`--tp`, `--layout`, a fleet file's
`racks_per_worker`) is kept exactly: its chips are the chips asked for, whatever the load. A deployment
nobody gives is the default one: the fewest whole units (LPX racks, NVL72 domains) that hold the weights
plus one stream of the workload's context (`backends.sizing`: the memory capacity model's arithmetic).

The layout inside a deployment is chosen once, for the deployment and its workload, never per
concurrency: the backend's layout search is asked to hold the largest power of two of streams of
`isl + osl` tokens that the capacity model says fit those chips (halved until the search lays one out).
A power of two because the step models schedule power-of-two micro-batch buckets; the deployment's own
KV ceiling (its compiled capacity and largest batch) then bounds the load it admits (`Answer`).

On LPX a layout may use fewer chips than the deployment holds (e.g. a 128-chip replica on a 256-chip
rack): the deployment then runs `chips // replica` replicas side by side, and any chips left over are
idle but powered (`Deployment.idle_chips`). A given LPX deployment of more whole units than the fewest that
hold the workload is laid out as copies of that smallest deployment's replica where those hold more streams
than the layout searched over all of them (`_most_held`): more racks never hold fewer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from lpxsim.backends import sizing
from lpxsim.catalog import get_model, get_system
from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.core.frameworks import LATEST
from lpxsim.engine.query import Deployment, Workload
from lpxsim.specs.hardware import SystemSpec
from lpxsim.specs.model import ModelSpec
from lpxsim.step.protocol import StepModel


@dataclass(frozen=True)
class Precision:
    """How the model's tensors are stored: weights, KV, and the KV layout."""

    weights: str = "fp8"
    kv: str = "bf16"
    kv_layout: str = "separate"


@dataclass(frozen=True)
class Placed:
    """A resolved deployment and the StepModel of one of its replicas."""

    deployment: Deployment
    step: StepModel
    model: ModelSpec
    design_streams: int  # the streams of isl + osl tokens the layout was searched to hold
    framework: str = "sglang"  # the GPU engine and layout goal it was placed with (a bigger deployment the
    goal: str = "latency"  # answer names is placed the same way: `engine.answer._needs`)


def deployment_from_flags(system: str, racks: float | None = None, chips: int | None = None,
                          gpus: int | None = None, tp: int | None = None, ep: int = 1, pp: int = 1,
                          dp_attention: bool = False, layout: str | None = None,
                          framework: str = "sglang", kv_parallel: bool = False) -> Deployment | None:
    """The deployment a command's flags give, or None when they give none (the engine's default then).

    LPX: `--racks` / `--chips` are the chips exactly (`--racks 1` is 256 chips); `--layout` the layout
    (fields it does not name are searched, once, for the workload). GPU: `--gpus` and, when given, `--tp`,
    `--ep`, `--pp`, `--dp-attention` (the layout; else searched)."""
    s = get_system(system)
    if s.is_lpu or s.is_wafer:
        if kv_parallel:
            raise UserError("kv_parallel", f"{s.name} is not a GPU system: --kv-parallel is a GPU layout")
        if (gpus is not None or tp is not None) and s.is_lpu:
            raise UserError("gpus", f"{s.name} is an LPU system: give --racks or --chips, not --gpus/--tp")
        if racks is None and chips is None and gpus is None and layout is None:
            return None
        n = gpus if (s.is_wafer and gpus is not None) else s.chips_from(racks, chips)
        return Deployment(s.name, n, layout=layout or "", given=True)
    if racks is not None or chips is not None:  # named as the user typed it
        raise UserError("racks" if racks is not None else "chips",
                        f"{s.name} is a GPU system: give --gpus (and --tp), not --racks/--chips")
    if layout is not None:
        raise UserError("layout", f"--layout is an LPX layout; on {s.name} give --tp/--ep/--pp/--dp-attention")
    if tp is None:  # the layout is searched: a part of one given alone would be dropped, so it is refused
        parts = {"ep": ep != 1, "pp": pp != 1, "dp_attention": dp_attention, "kv_parallel": kv_parallel}
        for field in (f for f, given in parts.items() if given):
            flag = "--" + field.replace("_", "-")
            raise UserError(field, f"{flag} is part of a layout: give --tp with it (without --tp the layout is "
                                   f"searched)")
    if gpus is None and tp is None:
        return None
    n = gpus if gpus is not None else tp
    lay = gpu_layout_text(tp, ep, pp, dp_attention, kv_parallel) if tp is not None else ""
    return Deployment(s.name, int(n), layout=lay, given=True, framework=framework)


def gpu_layout_text(tp: int, ep: int = 1, pp: int = 1, dp_attention: bool = False, kv_parallel: bool = False) -> str:
    """'tp=4,ep=1,pp=1[,dp-attention][,kvp]': a GPU replica's layout as a deployment states it."""
    return f"tp={tp},ep={ep},pp={pp}" + (",dp-attention" if dp_attention else "") + (",kvp" if kv_parallel else "")


def _parse_gpu_layout(text: str) -> dict:
    """A given GPU layout: the flags' form ('tp=8,ep=4,dp-attention') or a resolved deployment's ('TP8/EP4 fp8',
    so that a deployment an answer names can be asked about again)."""
    if "=" not in text:
        try:
            lay = gpu_layout_of(text)
        except ValueError:
            raise UserError("layout", f"bad GPU layout {text!r}; expected e.g. tp=4,ep=1,pp=1,dp-attention") from None
        lay.pop("replicas")
        return lay
    out: dict = {"ep": 1, "pp": 1, "dp_attention": False, "kv_parallel": False}
    given: set[str] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        if part in ("dp-attention", "kvp"):
            out["dp_attention" if part == "dp-attention" else "kv_parallel"] = True
            continue
        key, _, val = part.partition("=")
        if key not in ("tp", "ep", "pp") or not val.isdigit() or int(val) < 1:
            raise UserError("layout", f"bad GPU layout item {part!r}; expected e.g. tp=4,ep=1,pp=1,dp-attention")
        if key in given:  # tp=8,tp=4: which one was meant is not ours to guess
            raise UserError("layout", f"{key} given twice in {text!r}; give each of tp, ep, pp once")
        given.add(key)
        out[key] = int(val)
    return out


def default_units(model: ModelSpec, system: SystemSpec, context: int, p: Precision) -> int:
    """The fewest whole units that hold the weights plus one stream of `context` tokens."""
    return sizing.units_needed(model, system, context, p.weights, p.kv, p.kv_layout)


def design_streams(model: ModelSpec, system: SystemSpec, context: int, p: Precision, chips: int) -> int:
    """The streams a layout on `chips` chips is searched to hold (`backends.sizing.design_streams`)."""
    return sizing.design_streams(model, system, context, chips, p.weights, p.kv, p.kv_layout)


def _design(m: ModelSpec, s: SystemSpec, context: int, p: Precision, chips: int, goal: str) -> int:
    """The streams the layout search holds: on GPUs the latency goal lays out for one stream (the most tok/s
    per user) and the throughput goal for the most that fit; an LPX layout always holds the most that fit (its
    layouts differ in where KV lives, and one that holds fewer streams leaves the rack's SRAM unused)."""
    if not s.is_lpu and goal == "latency":
        return 1
    return design_streams(m, s, context, p, chips)


def place(model: str | ModelSpec, system: str, workload: Workload, deployment: Deployment | None = None,
          precision: Precision = Precision(), framework: str = "sglang", goal: str = "latency",
          release: str = LATEST) -> Placed:
    """The deployment (given, or the default one) with its layout resolved for `workload`, and its replica's
    StepModel. Memoised per process: every command asking about one deployment and workload shares it.
    `release`: the GPU engine release whose host time the steps carry (`gpu.engine.engine_params`; the latest
    for an answer, a measured run's own where a replay prices one)."""
    m = get_model(model) if isinstance(model, str) else model
    s = get_system(deployment.system if deployment is not None else system)
    if deployment is not None and deployment.system != s.name:
        deployment = replace(deployment, system=s.name)
    if not (s.is_lpu or s.is_wafer):  # an unknown engine is named here, not as every layout failing to place
        from lpxsim.core.frameworks import framework_name

        framework = framework_name(framework)
    return _place(m, s.name, workload.isl, workload.osl, deployment, precision, framework, goal, release)


@lru_cache(maxsize=128)
def _place(m: ModelSpec, system: str, isl: int, osl: int, dep: Deployment | None, p: Precision,
           framework: str, goal: str, release: str = LATEST) -> Placed:
    from lpxsim.backends.factory import Layout, make_step_model

    s = get_system(system)
    context = isl + osl
    given = dep is not None
    if s.is_wafer:  # Cerebras: a chain of wafers, laid out by its own backend
        lay = Layout(gpus=dep.chips if given else None)
        step = make_step_model(m, s.name, lay, weights=p.weights, kv=p.kv, kv_layout=p.kv_layout)
        return Placed(Deployment(s.name, step.chips, given=given), step, m, 1, framework, goal)
    if given:
        chips = dep.total_chips
        units = chips / s.chips_per_unit
    else:
        units = default_units(m, s, context, p)
        chips = units * s.chips_per_unit
    whole = float(units).is_integer()
    conc = _design(m, s, context, p, chips, goal)
    while True:
        try:
            if s.is_lpu:
                size = {"racks": float(units)} if whole else {"chips": chips}
                lay = Layout(**size, isl=isl, osl=osl, concurrency=conc, workload_grid=True,
                             lpx_layout=(dep.layout or None) if given else None)
            else:
                fixed = _parse_gpu_layout(dep.layout) if given and dep.layout else {}
                lay = Layout(gpus=chips, isl=isl, osl=osl, concurrency=conc, framework=framework, goal=goal,
                             release=release, **fixed)
            step = make_step_model(m, s.name, lay, weights=p.weights, kv=p.kv, kv_layout=p.kv_layout)
            break
        except DoesNotFit:
            if conc > 1:
                conc //= 2
                continue
            # A default deployment is the fewest whole units the backend lays the workload out on: where the
            # memory arithmetic says one unit holds it but the compiled layout does not, take the next.
            if given or not whole or units >= s.max_units:
                raise
            units += 1
            chips = units * s.chips_per_unit
            conc = _design(m, s, context, p, chips, goal)
    if not s.is_lpu:
        step = _one_gpu_replica(m, s.name, step, p, framework, release)
    elif given and whole and not dep.layout:
        step = _most_held(m, s, isl, osl, p, step, int(units), chips)
    replicas = max(1, chips // step.chips)
    resolved = Deployment(
        s.name, step.chips, layout=_layout_of(step), replicas=replicas, given=given,
        idle_chips=chips - replicas * step.chips, framework="" if s.is_lpu else getattr(step, "framework", framework),
        engine_release="" if s.is_lpu else getattr(step, "engine_release", None) or "")
    return Placed(resolved, step, m, conc, framework, goal)


def _most_held(m: ModelSpec, s: SystemSpec, isl: int, osl: int, p: Precision, step: StepModel, units: int,
               chips: int) -> StepModel:
    """Of the layout searched on all `units` given and copies of the smallest deployment's replica tiled over them,
    the replica whose copies hold more streams of isl + osl tokens (a layout holds the most that fit, `_design`;
    the search asks one replica to hold them all, which on several racks can hold fewer than racks of one each:
    Gemma 4 31B at 32K, 39 on one 512-chip replica against 2 x 22). Equal: the searched one (fewer hops a token)."""
    from lpxsim.engine.concurrency import replica_ceiling

    fewest = default_units(m, s, isl + osl, p)
    if fewest >= units:
        return step
    try:
        small = _place(m, s.name, isl, osl, Deployment(s.name, fewest * s.chips_per_unit, given=True), p, "", "latency")
    except (DoesNotFit, UserError):
        return step

    def held(st: StepModel) -> int:
        return (chips // st.chips) * replica_ceiling(st, isl + osl)

    return small.step if held(small.step) > held(step) else step


def gpu_layout_of(label: str) -> dict:
    """The GPU layout a step model's label states ('TP2/EP2/DPattn x36 fp8') as Layout fields and replicas."""
    head = label.split(" ")[0]
    out: dict = {"tp": 1, "ep": 1, "pp": 1, "dp_attention": False, "kv_parallel": False}
    for part in head.split("/"):
        if part == "DPattn":
            out["dp_attention"] = True
        elif part == "KVP":
            out["kv_parallel"] = True
        else:
            key, num = part[:2].lower(), part[2:]
            if key not in ("tp", "ep", "pp") or not num.isdigit():
                raise ValueError(f"unreadable GPU layout {label!r}")
            out[key] = int(num)
    reps = next((t[1:] for t in label.split(" ")[1:] if t.startswith("x") and t[1:].isdigit()), "1")
    return {**out, "replicas": int(reps)}


def _one_gpu_replica(m: ModelSpec, system: str, step: StepModel, p: Precision, framework: str,
                     release: str = LATEST) -> StepModel:
    """One replica of a GPU step model whose layout holds several behind one router: a deployment states its
    replicas (the engine splits the load over them, the simulator runs each as a worker)."""
    from lpxsim.backends.factory import Layout, make_step_model

    try:
        lay = gpu_layout_of(_layout_of(step))
    except ValueError:  # a step model that states no GPU layout (a test's stand-in): one replica as it is
        return step
    reps = lay.pop("replicas")
    if reps == 1:
        return step
    per = lay["tp"] * lay["pp"]
    return make_step_model(m, system, Layout(gpus=per, framework=framework, release=release, **lay),
                           weights=p.weights, kv=p.kv, kv_layout=p.kv_layout)


def _layout_of(step: StepModel) -> str:
    """The replica's layout as its name states it (read from the name, so that a step model answered from the
    step cache is not built for it): LPX 'M on lpx (tp=16,stages=16,kvsplit=4,replicas=1)', GPU 'SYS TP4 fp8'."""
    name = step.name
    if name.endswith(")") and " (" in name:
        return name[name.rindex(" (") + 2:-1].replace(",replicas=1", "")
    parts = name.split(" ")
    return " ".join(parts[1:]) if len(parts) > 1 else name


def units_for_streams(model: str | ModelSpec, system: str, context: int, streams: int,
                      precision: Precision = Precision()) -> int | None:
    """The fewest whole units whose memory holds `streams` streams of `context` tokens (None: more than the
    system joins). The 'needs N racks' of an over-capacity answer."""
    m, s = get_model(model) if isinstance(model, str) else model, get_system(system)
    p = precision
    for units in range(1, s.max_units + 1):
        if sizing.streams_that_fit(m, s, context, units * s.chips_per_unit, p.weights, p.kv, p.kv_layout) >= streams:
            return units
    return None
