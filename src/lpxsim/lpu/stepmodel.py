"""`LpxStepModel`: the LPX backend behind the StepModel seam, answered from compiled schedules.

The layout is chosen once, at construction, for a target context and
concurrency (a deployment is compiled once and then serves every request), as
one replica (the serving layer replicates). The target context is the longer
of the one asked for and 131,072 tokens (capped at the model's maximum) when
that still holds the asked concurrency, else the one asked for. Each step shape is compiled per
bucket (batch size, context) and cached; between context buckets the answer
is interpolated linearly (KV reads grow linearly with context), which a test
checks against direct compiles. With a long target (>= 64K) a decode shape whose cost at 16K lies on the
line between 1K and the target (within 0.5 %, checked from those three compiles) is priced from them alone
between 1K and the target, instead of from every bucket (a batch between 1 and the ceiling follows
those two); a prefill shape skips the buckets inside its flat stretch from 1K (`_flat_grid`). Decode
batches share batch 1's per-sequence context slope where the ceiling batch confirms it
(`_shared_slope`): each is compiled at the top of its bracket only. A decode within NEAR (0.5 %) of a
compiled context is priced at it (`_near_point`). A caller that serves one workload can name the
contexts it will ask about (`context_grid`): those are compiled exactly and
replace the generic buckets (fewer compiles, no interpolation at them). A batch
bucket larger than the replica holds is not compiled; the largest batch the
replica holds takes its place (a batch that does not fit there is compiled as itself).

Both the layout choice and each shape's compiled summary (timing and per-chip
memory, `step_summary`) are pure functions of (model spec, system spec, arch,
layout, phase, precisions) and are kept in the persistent step-cost cache
(`lpxsim.core.cache`), keyed with the source hash of the packages that compute them:
a second process with a warm cache compiles nothing.
"""

from __future__ import annotations

import math
from functools import cached_property

from lpxsim.catalog import get_model
from lpxsim.catalog import get_system as get_system_spec
from lpxsim.core.cache import source_version, step_cache
from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.core.progress import stage
from lpxsim.graph import Phase, lower
from lpxsim.lpu.arch import arch_for
from lpxsim.lpu.compiler import CompileResult, Target, build_program, resolve_system
from lpxsim.lpu.gcpause import gc_paused
from lpxsim.lpu.layout import Layout, parse_layout
from lpxsim.lpu.partition import RESERVE_FRACTION, choose_layout
from lpxsim.lpu.timing import Timing, summarize
from lpxsim.lpu.verify import verify
from lpxsim.specs.accounting import kv_bytes_per_sequence
from lpxsim.specs.model import ModelSpec
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost

SOURCES = ("lpxsim.lpu", "lpxsim.graph", "lpxsim.specs", "lpxsim.catalog")  # code and data the cached values depend on
CONTEXT_BUCKETS = (0, 1024, 4096, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
DEFAULT_TARGET_CONTEXT = 131_072
# Sparse context grid: a decode (or verify) shape whose compiled cost at SPARSE_MID lies on the line between
# SPARSE_LO and the target context (within LINEAR_TOL, latency and interval) is priced from those three
# compiles for every context between them, instead of from every generic bucket. Measured on Gemma 4 31B
# (1 rack, 131K target): decode at 16K is 0.007 % off the 4K-131K line.
SPARSE_LO, SPARSE_MID, SPARSE_MIN_TOP = 1024, 16384, 65536
LINEAR_TOL = 0.005
# A context at most this fraction above the target is priced on the line through the grid's last bracket: the
# serving loop's context buckets (`serving.worker.ctx_bucket`, 1/64 of the context) round up past the target.
OVERSHOOT = 1 / 64
# A decode or verify at a context within this fraction of a compiled grid point (>= SPARSE_LO) is priced at that
# point: a step's KV term is at most linear in the context it attends, so the cost moves by at most this
# fraction between the two (a workload's decode contexts, isl .. isl + osl, sit just below its replica's target).
NEAR = 0.005
PREFILL_ROWS = 256  # tokens per sequence in one scheduled prefill sub-chunk


class CompileNotVerified(RuntimeError):
    """A compiled step failed `lpxsim.lpu.verify` (a compiler bug, not a user mistake)."""


def _batch_bucket(b: int) -> int:
    """Batches compiled: 1, 2, then powers of two (a batch in between is interpolated linearly)."""
    return b if b <= 2 else 1 << (b - 1).bit_length()


def _batch_below(b: int) -> int:
    """The compiled batch below `b` (> 1) that a batch between buckets is interpolated from."""
    return 1 << ((b - 1).bit_length() - 1)


def _rows_bracket(rows: int) -> tuple[int, int]:
    """The powers of two around `rows` (equal when `rows` is one): the prefill sub-chunk sizes compiled."""
    lo = 1 << (rows.bit_length() - 1)
    return lo, (lo if lo == rows else lo * 2)


def _near_point(context: int, grid: tuple[int, ...]) -> int | None:
    """The grid point of at least SPARSE_LO nearest to `context` when within NEAR of it (relative to the
    point), else None. With a cost affine in the context and a non-negative intercept (a step's fixed part
    plus its KV reads), |cost(context) - cost(point)| <= NEAR * cost(point)."""
    g = min((g for g in grid if g >= SPARSE_LO), key=lambda g: abs(g - context), default=None)
    return g if g is not None and abs(g - context) <= NEAR * g else None


def _bracket(x: int, grid: tuple[int, ...]) -> tuple[int, int]:
    lo = max(g for g in grid if g <= x) if x >= grid[0] else grid[0]
    hi = min((g for g in grid if g >= x), default=x)
    return lo, hi


class LpxStepModel:
    """One replica of `model` compiled onto LPUs of `system` (default: the fewest racks it fits)."""

    part = "all"  # the op graph compiled (`graph.lower`'s part): "ffn" for the FFN side of AFD

    def __init__(self, model: str | ModelSpec, system: str = "lpx", racks: float | None = None,
                 chips: int | None = None, weights: str = "fp8", kv: str = "bf16", kv_layout: str = "separate",
                 layout: str | Layout | None = None, context: int | None = None, concurrency: int = 1,
                 chip_sram_bytes: int | None = None, variant: str | None = None,
                 context_grid: tuple[int, ...] | None = None) -> None:
        self.model = get_model(model)
        self.weights, self.kv, self.kv_layout = weights, kv, kv_layout
        long_ctx = min(self.model.max_context or DEFAULT_TARGET_CONTEXT, DEFAULT_TARGET_CONTEXT)
        ctx = long_ctx if context is None else int(context)
        # Prefer one deployment that also serves long context (as the AA endpoint served 10K and 100K);
        # fall back to exactly the asked context when the long one cannot hold `concurrency` streams.
        self._targets = [Target(max(ctx, long_ctx), int(concurrency))]
        if ctx < long_ctx:
            self._targets.append(Target(ctx, int(concurrency)))
        self.target = self._targets[0]
        self._sram = chip_sram_bytes
        self._variant = variant
        self._searched: dict[tuple, list[Layout]] = {}  # layout searches of this construction (`_candidates`)
        self._summaries: dict[tuple, dict] = {}
        self.compiles = 0  # programs built by this instance (a warm persistent cache keeps it at 0)
        self._cache: dict[tuple, CompileResult] = {}
        self._layout_arg = layout if layout is None or isinstance(layout, str) else layout.describe()
        choice = step_cache().get_or_compute(
            "lpx-layout", source_version(*SOURCES),
            (self.model, self.part, get_system_spec(system), variant, racks, chips, self._layout_arg, ctx,
             int(concurrency), weights, kv, kv_layout, chip_sram_bytes), lambda: self._choose_fresh(system, racks, chips, layout),
            valid=_is_layout_choice)
        if "error" in choice:
            raise DoesNotFit(choice["field"], choice["error"])
        self.target = Target(*choice["target"])
        if racks is None and chips is None:
            self.system, self.n_chips, self.units = resolve_system(system, float(choice["units"]), None, variant)
        else:
            self.system, self.n_chips, self.units = resolve_system(system, racks, chips, variant)
        self.arch = arch_for(self.system).with_sram(chip_sram_bytes)
        self.layout = Layout(**choice["layout"])
        if context_grid is not None and any(int(c) < 0 for c in context_grid):
            raise UserError("context_grid", f"expected contexts >= 0, got {context_grid}")
        self._grid = self._context_grid(context_grid)
        top = self.target.context
        # Only for the generic buckets (a caller's own grid is already the few contexts it asks about).
        self._sparse = (0, SPARSE_LO, SPARSE_MID, top) if context_grid is None and top >= SPARSE_MIN_TOP else None
        self._linear: dict[tuple, bool] = {}
        self._slopes: dict[tuple, tuple[float, float, int] | None] = {}
        self._flat: dict[tuple, tuple[int, ...]] = {}
        self._flat_end: dict[tuple, int] = {}  # (kind, batch, rows) -> the last bucket of its flat stretch

    def _context_grid(self, points: tuple[int, ...] | None) -> tuple[int, ...]:
        """Contexts compiled exactly (interpolated between): the caller's points, else the generic buckets;
        always 0, the first bucket (below it a prefill chunk attends mostly to itself, so its cost is not
        affine in the context from 0) and the target context. When the target is one of the caller's points,
        the others are dropped."""
        top = self.target.context
        if points is not None and top in {int(c) for c in points}:
            # laid out for exactly the caller's last point: the target closes every bracket above 1K, and a
            # point in between would only add compiles (a batch would compile there and at the target)
            points = ()
        base = CONTEXT_BUCKETS if points is None else (CONTEXT_BUCKETS[1], *(int(c) for c in points))
        return tuple(sorted({g for g in base if g < top} | {0, top}))

    # --- construction -------------------------------------------------------------------
    def _size(self, system: str, racks: float | None, chips: int | None, layout):
        if racks is not None or chips is not None:
            return resolve_system(system, racks, chips, self._variant)
        s, _, _ = resolve_system(system, None, None, self._variant)
        for units in range(1, s.max_units + 1):
            sys_, n, u = resolve_system(system, float(units), None, self._variant)
            arch = arch_for(sys_).with_sram(self._sram)
            if self._candidates(sys_, arch, n, layout):
                return sys_, n, u
        asked = self._targets[-1]  # the context the caller asked for (the long one is only preferred)
        raise DoesNotFit("model", f"{self.model.name} ({self.weights}) does not fit {s.max_units} {s.unit_name}s "
                                  f"of {s.name} at context {asked.context:,}")

    def _candidates(self, system, arch, n, layout) -> list[Layout]:
        forced = parse_layout(layout) if isinstance(layout, str) else (
            {"tp": layout.tp, "stages": layout.stages, "kv_seq_split": layout.kv_seq_split,
             "kv_spread": layout.kv_spread, "kv_block": layout.kv_block} if layout else {})
        forced = {**forced, "replicas": 1}
        for target in self._targets:
            # the construction asks the same search up to three times (sizing, the first target with candidates,
            # each target in turn): one search per (system, chips, SRAM, target, forced layout)
            key = (system.name, n, arch.sram_bytes, target.context, target.concurrency, tuple(sorted(forced.items())))
            cands = self._searched.get(key)
            if cands is None:
                cands = self._searched[key] = choose_layout(self.model, system, arch, n, target, self.weights,
                                                            self.kv, self.kv_layout, forced)[0]
            if cands:
                self.target = target
                return cands
        return []

    def _choose_fresh(self, system: str, racks, chips, layout) -> dict:
        """The layout search (cacheable): units, target and layout, or the DoesNotFit it raised."""
        try:
            self.system, self.n_chips, self.units = self._size(system, racks, chips, layout)
            self.arch = arch_for(self.system).with_sram(self._sram)
            lay = self._choose(layout)
        except DoesNotFit as e:
            return {"error": e.message, "field": e.field}
        return {"units": self.units, "target": [self.target.context, self.target.concurrency],
                "layout": {"tp": lay.tp, "stages": lay.stages, "replicas": lay.replicas,
                           "kv_seq_split": lay.kv_seq_split, "kv_spread": lay.kv_spread, "kv_block": lay.kv_block}}

    def _choose(self, layout) -> Layout:
        """The best candidate that places, for the long target first, then for the asked context."""
        targets = list(self._targets)
        self._candidates(self.system, self.arch, self.n_chips, layout)  # sets the first target with candidates
        for target in targets[targets.index(self.target):]:
            self._targets, self.target = [target], target
            cands = self._candidates(self.system, self.arch, self.n_chips, layout)
            phase = Phase.decode([self._choice_context(target)] * target.concurrency)
            for i, lay in enumerate(cands, 1):
                try:
                    res = self._build(lay, phase, why=f"layout {i}/{len(cands)}")
                except DoesNotFit:
                    continue
                self.layout = lay
                self._cache[(phase.kind, phase.contexts, phase.new_tokens)] = res  # the chosen one, reused
                self.step_summary(phase)  # stored with the layout, so a warm process never compiles it
                self._targets = targets
                return lay
        self._targets, self.target = targets, targets[-1]
        asked = self.target  # name the context the user asked for, not the long default
        raise DoesNotFit("layout", f"no layout of {self.model.name} fits {self.n_chips} x {self.system.chip.name} "
                                   f"at context {asked.context:,}, concurrency {asked.concurrency}")

    def _choice_context(self, target: Target) -> int:
        """The context of the decode step a layout is checked on: the target's (the FFN side's override
        checks at context 0, where its steps are priced: an FFN-only program does not depend on it)."""
        return target.context

    @gc_paused  # a step-model compile builds ~10^5 long-lived records: the collector only rescans them
    def _build(self, lay: Layout, phase: Phase, why: str = "") -> CompileResult:
        """Compile and verify one step: every program whose timing a user gets has passed `verify`
        (a program that does not is a compiler bug: `CompileNotVerified`, never a silent answer).
        `why` names the compile in the progress line ('layout 2/5'; default: its ordinal)."""
        self.compiles += 1
        ctx = max(phase.contexts, default=0)
        with stage(f"compiling {why or self.compiles}: {self.model.name} {phase.kind} x{phase.sequences} "
                   f"{lay.describe()} @{ctx:,}"):
            graph = lower(self.model, phase, weights=self.weights, kv=self.kv, kv_layout=self.kv_layout,
                          part=self.part)
            prog, summary = build_program(graph, self.system, self.units, self.arch, lay, self.n_chips)
            rep = verify(prog, graph, self.arch)
        if not rep.ok or rep.skipped:
            raise CompileNotVerified(
                f"{self.model.name} {phase.kind} x{phase.sequences} at {max(phase.contexts, default=0):,} "
                f"({lay.describe()}) did not verify: {'; '.join(rep.errors[:3] or rep.skipped[:3])}")
        return CompileResult(prog, rep, summarize(prog, graph, self.arch), lay, summary)

    # --- the StepModel protocol ---------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.model.name} on {self.system.name} ({self.layout.describe()})"

    @property
    def chips(self) -> int:
        return self.layout.chips

    @property
    def power_w(self) -> float:
        return float(self.system.power_w) * self.chips / self.system.chips_per_unit

    def compile(self, phase: Phase) -> CompileResult:
        """The compiled step for exactly this phase (cached)."""
        key = (phase.kind, phase.contexts, phase.new_tokens)
        if key not in self._cache:
            self._cache[key] = self._build_phase(phase)
        return self._cache[key]

    def _build_phase(self, phase: Phase) -> CompileResult:
        try:
            return self._build(self.layout, phase)
        except DoesNotFit as e:
            raise DoesNotFit(
                "concurrency",
                f"{phase.sequences} stream(s) at {max(phase.contexts):,} tokens do not fit this replica "
                f"({self.layout.describe()}, compiled for {self.target.concurrency} x {self.target.context:,}"
                f" tokens): {e.message}") from None

    def step_summary(self, phase: Phase) -> dict:
        """The compiled step's timing (`Timing.as_dict`) and per-chip memory for `phase`, from the
        persistent cache when present; raises DoesNotFit as `compile` does."""
        key = (phase.kind, phase.contexts, phase.new_tokens)
        hit = self._summaries.get(key)
        if hit is None:
            hit = step_cache().get_or_compute(
                "lpx-step", source_version(*SOURCES),
                (self.model, self.part, self.system, self.units, self.n_chips, self._sram, self.layout.describe(),
                 self.weights, self.kv, self.kv_layout, *key), lambda: self._summary_fresh(phase),
                valid=_is_summary)
            self._summaries[key] = hit
        if "error" in hit:
            raise DoesNotFit(hit["field"], hit["error"])
        if hit.get("verified") is not True:  # every summary a user gets came from a verified program
            raise CompileNotVerified(f"step summary {key} was not recorded as verified")
        return hit

    def _summary_fresh(self, phase: Phase) -> dict:
        """Compile `phase` for its summary only: the program is not kept (a serving run prices hundreds of
        shapes; keeping each program held GBs), `compile` keeps the ones asked for by name."""
        try:
            res = self._cache.get((phase.kind, phase.contexts, phase.new_tokens)) or self._build_phase(phase)
        except DoesNotFit as e:
            return {"error": e.message, "field": e.field}
        return {"timing": res.timing.as_dict(), "memory": {str(c): dict(v) for c, v in res.memory.items()},
                "verified": res.report.ok}

    def timing(self, phase: Phase) -> Timing:
        """The compiled step's Timing (cached on disk; see `step_summary`)."""
        t = dict(self.step_summary(phase)["timing"])
        t["stage_spans_s"] = tuple(t["stage_spans_s"])
        return Timing(**t)

    def _cost(self, kind: str, batch: int, context: int, new: int) -> StepCost:
        if batch <= 0:
            raise UserError("batch", "a step needs at least one sequence")
        b = _batch_bucket(batch)
        if b != batch and b > self.max_batch() >= batch:
            # The bucket would not fit: the largest batch the replica holds closes the segment instead, so every
            # batch between the power of two below and the ceiling shares its compile (a shorter segment of the
            # same line the bucket would give; each exact batch was one compile per context before).
            b = self.max_batch()
        elif b != batch and batch > self.max_batch() and b * self.kv_bytes(context + new) > self.kv_capacity_bytes():
            # The bucket's KV alone exceeds what the replica holds: its compile would be refused, so compile the
            # batch itself (which may still fit, below the target context) without trying the bucket first.
            b = batch
        try:
            lat, ii = self._at_context(kind, b, context, new)
        except DoesNotFit:
            if b == batch:
                raise
            b = batch  # the bucket does not fit (e.g. a prefill's activations): compile the batch itself
            lat, ii = self._at_context(kind, b, context, new)
        if b != batch:  # between batch buckets: linear in the rows processed
            small = _batch_below(batch)
            if small < batch:
                s = self._cost(kind, small, context, new)
                f = (batch - small) / (b - small)
                lat = s.latency_s + f * (lat - s.latency_s)
                ii = s.interval_s + f * (ii - s.interval_s)
        return StepCost(lat, min(ii, lat))

    def _at_context(self, kind: str, b: int, context: int, new: int) -> tuple[float, float]:
        """(latency, interval) of `b` sequences at `context`, linear between the context grid's points.

        A decode or verify within NEAR of a grid point is priced at that point (`_near_point`). A decode or
        verify batch whose bracket has a checked per-sequence slope (`_shared_slope`) is compiled
        at the top of the bracket only and re-timed down to `context` by that slope: its KV-dependent term."""
        grid = self._grid_for(kind, b, new, context)
        if kind != "prefill":
            near = _near_point(context, grid)
            if near is not None:
                t = self.step_summary(Phase(kind, (near,) * b, new))["timing"]  # type: ignore[arg-type]
                return t["latency_s"], t["interval_s"]
        top = self.target.context
        if top < context <= top + top * OVERSHOOT and len(grid) > 1 and grid[-1] == top:
            # Just above the target (the serving loop rounds contexts to 1/64 of their size): the line through
            # the last bracket, as between grid points, instead of a compile of its own.
            lo, hi = grid[-2], top
        else:
            lo, hi = _bracket(max(0, context), grid)  # further above the target: exact
        if lo != hi and b > 1 and kind != "prefill":
            shared = self._shared_slope(kind, new, lo, hi)
            if shared is not None and b <= shared[2]:
                t = self.step_summary(Phase(kind, (hi,) * b, new))["timing"]  # type: ignore[arg-type]
                d = b * (hi - context)
                return t["latency_s"] - d * shared[0], t["interval_s"] - d * shared[1]
        costs = []
        for ctx in sorted({lo, hi}, reverse=True):  # the top first: where a batch does not fit, it fails there
            ph = Phase(kind, tuple([ctx] * b), new)  # type: ignore[arg-type]
            t = self.step_summary(ph)["timing"]
            costs.insert(0, (ctx, t["latency_s"], t["interval_s"]))
        if len(costs) == 1:
            return costs[0][1], costs[0][2]
        (c0, l0, i0), (c1, l1, i1) = costs
        f = (context - c0) / (c1 - c0)
        return l0 + f * (l1 - l0), i0 + f * (i1 - i0)

    def _grid_for(self, kind: str, b: int, new: int, context: int) -> tuple[int, ...]:
        """The context grid for this shape: the sparse one between SPARSE_LO and the target when the shape
        is checked linear in context there (`_is_linear`), else the generic buckets."""
        if self._sparse is None or not SPARSE_LO < context < self.target.context:
            return self._grid
        # A batch the target context does not hold would spend a compile on a refusal: it keeps the buckets.
        if b > self.max_batch():
            return self._grid
        # Prefill is not linear there (Gemma 4 31B, 256 rows: flat to 32K, +1.8 % at 64K, +6.7 % at 131K) but
        # flat from 1K up to some context: the buckets inside its flat stretch are skipped (`_flat_grid`).
        if kind == "prefill":
            fkey = (kind, b, new)
            if fkey not in self._flat:
                self._flat[fkey] = self._flat_grid(kind, b, new)
            return self._flat[fkey]
        key = (kind, b, new)
        if key not in self._linear:
            top = self.max_batch()
            # A batch between 1 and a ceiling of 4 or more follows batch 1 and the ceiling (no check of its own:
            # three compiles, wasted when it fails, as it does wherever the ceiling is not linear either).
            shared = 1 < b < top and top >= 4
            self._linear[key] = self._linear_by_shared_slope(kind, b, new) if shared else self._is_linear(kind, b, new)
        return self._sparse if self._linear[key] else self._grid

    def _flat_grid(self, kind: str, b: int, new: int) -> tuple[int, ...]:
        """The generic buckets without those strictly inside the stretch from SPARSE_LO (1K) to the furthest
        bucket below the target whose compiled cost is within LINEAR_TOL of the 1K one (latency and interval;
        found by probing the buckets from the top one down: every bucket probed above the stretch's end stays
        in the grid, so only the end itself is a compile a workload spanning the buckets would not make
        anyway; a bisection also compiled buckets inside the stretch, which the grid then drops). A step's
        cost does not fall as its context grows (more keys to read), so inside that stretch the cost lies
        between the two compiles and the linear answer is within LINEAR_TOL of a direct compile. Measured (Gemma 4 31B, 256-row prefill):
        equal to the cycle from 1K to 64K on the 100K modes deployment, to 32K on the AA deployment. The search
        starts where the nearest row count's stretch ended (`_flat_hint`), when one has been found."""
        top = self.target.context
        pts = [g for g in self._grid if SPARSE_LO <= g < top]
        if len(pts) < 3:
            return self._grid
        keys = ("latency_s", "interval_s")

        def cost(g: int) -> dict:
            return self.step_summary(Phase(kind, (g,) * b, new))["timing"]  # type: ignore[arg-type]

        try:
            base = cost(pts[0])
        except DoesNotFit:
            return self._grid

        def flat(g: int) -> bool:
            try:
                t = cost(g)
            except DoesNotFit:
                return False
            return all(abs(t[x] - base[x]) <= LINEAR_TOL * base[x] for x in keys)

        lo, hi = 0, len(pts) - 1
        hint = self._flat_hint(kind, b, new, pts)
        if hint is not None:  # where the nearest row count's stretch ended, and the bucket beyond it
            if flat(pts[hint]):
                lo, nxt = hint, hint + 1
                if flat(pts[nxt]):
                    lo = nxt
                else:
                    hi = nxt
            else:
                hi = hint
        if lo < hi == len(pts) - 1 and flat(pts[hi]):
            lo = hi
        while hi - lo > 1:  # down from the top: a bucket probed above the stretch's end stays a grid point
            if flat(pts[hi - 1]):
                lo = hi - 1
            else:
                hi -= 1
        self._flat_end[(kind, b, new)] = pts[lo]
        return tuple(g for g in self._grid if not pts[0] < g < pts[lo])

    def _flat_hint(self, kind: str, b: int, new: int, pts: list[int]) -> int | None:
        """The index in `pts` where the flat stretch of the same kind and batch with the nearest row count
        (by ratio) ended, if one was found and lies strictly inside `pts`; else None. Under the rule's own
        premise (cost never falls with context, so "flat" holds on a prefix of the buckets) starting the
        search there finds the same end as the search from the top: it only changes which buckets are compiled to
        find it: when the stretch ends at the same bucket, the search compiles that bucket and the next
        (Gemma 4 31B on the 131K AA deployment: 8- to 256-row prefills all end at 32K; two compiles each
        besides the 1K base instead of three)."""
        near = [(abs(math.log2(max(n, 1) / max(new, 1))), end) for (k, bb, n), end in self._flat_end.items()
                if k == kind and bb == b]
        if not near:
            return None
        end = min(near)[1]
        return pts.index(end) if end in pts[1:-1] else None

    def _linear_by_shared_slope(self, kind: str, b: int, new: int) -> bool:
        """A batch between 1 and the ceiling is linear in context on the sparse grid when batch 1 and the
        ceiling are (`_is_linear`) and their slopes per sequence agree there (`_shared_slope`): then the
        batch costs one compile (at the target) instead of three; otherwise it takes the generic buckets."""
        top = self.max_batch()
        lo, hi = self._sparse[1], self._sparse[3]  # type: ignore[index]
        return (self._linear_at(kind, 1, new) and self._linear_at(kind, top, new)
                and self._shared_slope(kind, new, lo, hi) is not None)

    def _linear_at(self, kind: str, b: int, new: int) -> bool:
        key = (kind, b, new)
        if key not in self._linear:
            self._linear[key] = self._is_linear(kind, b, new)
        return self._linear[key]

    def _shared_slope(self, kind: str, new: int, lo: int, hi: int) -> tuple[float, float, int] | None:
        """The per-sequence context slope (latency, interval per sequence-token) between grid points `lo` and
        `hi`, measured on the batch-1 compiles, with the largest batch that slope may serve -- or None.

        A decode step's KV term grows with the tokens it attends, i.e. with batch x context: measured on Gemma 4
        31B (one rack, 10K deployment), the 4K -> 10K change at batch b is b times batch 1's to within 0.02 %
        for b = 2-40. It holds here when the ceiling batch (max_batch, compiled at both points) is predicted from
        its own top compile and that slope within LINEAR_TOL (latency and interval) at `lo`, the far end of the
        bracket: any batch in between is then priced from its compile at `hi` alone. Only with a ceiling of 4 or
        more (below that the check would cost as much as it saves); a shape that does not fit is not shared."""
        key = (kind, new, lo, hi)
        if key in self._slopes:
            return self._slopes[key]
        top = self.max_batch()
        out = None
        if top >= 4:
            try:
                one = [self.step_summary(Phase(kind, (c,), new))["timing"] for c in (lo, hi)]  # type: ignore[arg-type]
                big = [self.step_summary(Phase(kind, (c,) * top, new))["timing"]  # type: ignore[arg-type]
                       for c in (hi, lo)][::-1]  # the top first: a ceiling that does not fit fails there
            except DoesNotFit:
                big = None
            if big is not None:
                k = ("latency_s", "interval_s")
                slope = [(one[1][x] - one[0][x]) / (hi - lo) for x in k]
                if all(abs(big[1][x] - top * (hi - lo) * sl - big[0][x]) <= LINEAR_TOL * big[0][x]
                       for x, sl in zip(k, slope, strict=True)):
                    out = (slope[0], slope[1], top)
        self._slopes[key] = out
        return out

    def _is_linear(self, kind: str, b: int, new: int) -> bool:
        """Whether the compiled cost at SPARSE_MID is within LINEAR_TOL of the line through SPARSE_LO and the
        target context (three compiles, all of them grid points either way); a shape that does not fit at
        one of them is not."""
        lo, mid, hi = self._sparse[1:]  # type: ignore[index]
        try:
            t = [self.step_summary(Phase(kind, (c,) * b, new))["timing"]  # type: ignore[arg-type]
                 for c in (hi, mid, lo)][::-1]  # the top first: a shape that does not fit fails there
        except DoesNotFit:
            return False
        f = (mid - lo) / (hi - lo)
        return all(abs(t[0][k] + f * (t[2][k] - t[0][k]) - t[1][k]) <= LINEAR_TOL * t[1][k]
                   for k in ("latency_s", "interval_s"))

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        ctx = int(round(sum(batch.contexts) / max(1, batch.size)))
        return self._cost("decode", batch.size, ctx, 1)

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        """A chunk streams through the pipeline in sub-chunks of at most PREFILL_ROWS tokens per sequence
        (activations of a whole 8K-token chunk would not fit a chip's SRAM), halved until one fits. The size
        is found for each shape afresh (the refusals are cached), so an answer never depends on which shapes
        were asked before: a step model that once met a chunk too large for 256 rows used to prefill every
        later chunk in smaller sub-chunks, and a run's costs then depended on the cache's history."""
        if chunk.tokens <= 0:
            raise UserError("tokens", "a prefill chunk needs at least one token")
        rows = PREFILL_ROWS
        while True:  # the largest sub-chunk whose activations fit beside the weights
            sub = min(chunk.tokens, rows)
            n = math.ceil(chunk.tokens / sub)
            mid = chunk.context + (chunk.tokens - sub) // 2  # sub-chunks see a growing context: use the middle
            try:
                c = self._rows_cost(chunk.sequences, mid, sub)
                break
            except DoesNotFit:
                if sub == 1:
                    raise
                rows = sub // 2
        scale = chunk.tokens / (n * sub)
        return StepCost((c.latency_s + (n - 1) * c.interval_s) * scale, n * c.interval_s * scale)

    def _rows_cost(self, sequences: int, context: int, rows: int) -> StepCost:
        """One prefill sub-chunk of `rows` tokens per sequence, compiled at the powers of two around `rows`
        and interpolated linearly between them (rows per step grow the step's matmul and attention work
        linearly), so the compiles do not grow with the number of distinct prompt remainders."""
        lo, hi = _rows_bracket(rows)
        a = self._cost("prefill", sequences, context, lo)
        if hi == lo:
            return a
        b = self._cost("prefill", sequences, context, hi)
        f = (rows - lo) / (hi - lo)
        lat = a.latency_s + f * (b.latency_s - a.latency_s)
        return StepCost(lat, min(lat, a.interval_s + f * (b.interval_s - a.interval_s)))

    def verify(self, batch: DecodeBatch, k: int) -> StepCost:
        if k < 0:
            raise UserError("k", "draft length must be >= 0")
        ctx = int(round(sum(batch.contexts) / max(1, batch.size)))
        return self._cost("verify", batch.size, ctx, k + 1)

    def kv_bytes(self, context: int) -> float:
        return kv_bytes_per_sequence(self.model, context, self.kv, self.kv_layout)

    @cached_property
    def _free_per_stream(self) -> tuple[float, float]:
        """(streams that fit at the target context, free SRAM bytes) from the compiled target step."""
        c = self.stream_ceiling(self.target.context)
        return c["streams_exact"], c["free_min_bytes"]

    def stream_ceiling(self, context: int) -> dict:
        """How many streams of exactly `context` tokens this replica holds, from its compiled decode step at that
        context (not a bucket): each chip's SRAM, less its weights and the larger of its activations + buffers and
        the search's per-chip reserve (`partition.RESERVE_FRACTION`, the capacity model's), over the KV one stream
        puts on it; the fullest chip decides. Returns `streams` (whole), `streams_exact`, the deciding `chip`, its
        `weights_bytes`, `kv_bytes_per_stream` and `free_bytes`, and the smallest free SRAM (`free_min_bytes`)."""
        memory = self.step_summary(Phase.decode([int(context)]))["memory"]
        reserve = self.arch.sram_bytes * RESERVE_FRACTION
        best = {"streams_exact": math.inf, "chip": None, "weights_bytes": 0.0, "kv_bytes_per_stream": 0.0,
                "free_bytes": 0.0}
        free_min = math.inf
        for chip, m in memory.items():
            free = self.arch.sram_bytes - m["weights"] - max(m["act"] + m["buffer"], reserve)
            free_min = min(free_min, free)
            if m["kv"] > 0 and free / m["kv"] < best["streams_exact"]:
                best = {"streams_exact": free / m["kv"], "chip": int(chip), "weights_bytes": float(m["weights"]),
                        "kv_bytes_per_stream": float(m["kv"]), "free_bytes": float(free)}
        best["streams"] = int(max(0, math.floor(min(float(1 << 20), best["streams_exact"]) + 1e-9)))
        best["free_min_bytes"] = free_min
        return best

    def kv_capacity_bytes(self) -> float:
        streams, _ = self._free_per_stream
        return max(0.0, streams) * self.kv_bytes(self.target.context)

    def max_batch(self) -> int:
        streams, _ = self._free_per_stream
        return int(max(1, min(1024, math.floor(streams))))


def _is_layout_choice(v: object) -> bool:
    """A cached layout choice: a refusal {field, error} or {target, units, layout} (else recomputed)."""
    if not isinstance(v, dict):
        return False
    if "error" in v:
        return isinstance(v.get("field"), str) and isinstance(v["error"], str)
    return (isinstance(v.get("target"), list) and isinstance(v.get("layout"), dict)
            and isinstance(v.get("units"), (int, float)) and not isinstance(v.get("units"), bool))


def _is_summary(v: object) -> bool:
    """A cached step summary: a refusal {field, error} or a dict carrying its `verified` flag."""
    if not isinstance(v, dict):
        return False
    return (isinstance(v.get("field"), str) and isinstance(v["error"], str)) if "error" in v else "verified" in v
