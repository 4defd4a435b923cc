"""A memo in front of every detailed StepModel: each step shape is priced once, ever.

`lpxsim.backends.factory.make_step_model` wraps the backend it builds in `MemoStepModel`.
The wrapper answers every StepModel question from a table keyed by the step's
shape (decode: its contexts; prefill: tokens, context, sequences; verify: contexts
and k), so the event loop never re-prices a shape. The table also persists
through `lpxsim.core.cache.step_cache()` as one entry per replica, keyed by a hash of
the model spec, the system spec, the layout, the precisions and the source of the
backends: a later process that finds the table answers from it without building
the backend at all (no compile, no import of the backend), and builds it only on
the first shape the table lacks. A shape the backend refuses (`DoesNotFit`) is
remembered as that refusal and raised again, with the same field and message.

Any other attribute (a backend's own detail, e.g. the AFD hooks of the GPU model)
is forwarded to the backend, building it if needed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lpxsim.core.cache import digest, flush_at_exit, source_version, step_cache
from lpxsim.core.errors import DoesNotFit
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost, StepModel

NAMESPACE = "stepmodel-table"
# Packages whose code or fitted data decides a detailed step cost: editing any of them changes every
# table key (catalog/fitted: a refit of the GPU engines or LPX constants must not answer from old tables).
COST_PACKAGES = ("lpxsim.lpu", "lpxsim.gpu", "lpxsim.graph", "lpxsim.specs", "lpxsim.catalog.fitted")
_TABLE_LIMIT = 200_000  # shapes per section beyond which new ones stay in memory only (the file stays small)
_REGISTRY_SIZE = 32


@dataclass
class MemoStats:
    """Process-wide counters: how many backends were built and how many step shapes were priced."""

    built: int = 0  # backends constructed (an LPX one compiles)
    priced: int = 0  # step shapes computed by a backend (misses of every table)
    answered: int = 0  # step questions answered from a table


stats = MemoStats()


def _ctx_key(contexts: tuple[int, ...]) -> str:
    """A compact text key for a batch's contexts (uniform batches, the common case, stay short)."""
    if contexts and all(c == contexts[0] for c in contexts):
        return f"{len(contexts)}x{contexts[0]}"
    return ",".join(map(str, contexts))


# Descriptive backend attributes kept in the table's meta, so a warm process need not build the backend.
_REMEMBERED = ("cost_sources", "framework", "engine_release", "admission_hold", "admission_poll", "prefill_pass_tokens",
               "prefill_alone", "decode_batch_breaks")


class MemoStepModel:
    """A StepModel answered from a per-shape table, with the real backend built only on a miss."""

    def __init__(self, build: Callable[[], StepModel], key: str, persist: bool = True) -> None:
        self._build = build
        self._inner: StepModel | None = None
        self._key = key
        self._persist = persist
        stored = step_cache().get(self._key, is_table) if persist else None
        self._table: dict[str, dict[str, Any]] = _valid(stored) or {"meta": {}, "decode": {}, "prefill": {},
                                                                    "verify": {}, "kv": {}}
        self._dirty = False
        _on_exit()
        if not self._table["meta"]:
            # First time for this replica: build now, so a model that does not fit fails here, as it
            # always did, and not later at a step (where a refusal means "not this batch").
            self.inner  # noqa: B018
            self._meta()

    # --- the backend ------------------------------------------------------------------------
    @property
    def inner(self) -> StepModel:
        """The wrapped backend (built on first need)."""
        if self._inner is None:
            self._inner = self._build()
            stats.built += 1
        return self._inner

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_inner", "_build", "_table"):
            raise AttributeError(name)
        if name in _REMEMBERED and self._inner is None and name in self._table["meta"]:
            value = self._table["meta"][name]  # answered from the table: no backend built for it
            return tuple(value) if isinstance(value, list) else value  # JSON keeps a tuple as a list
        return getattr(self.inner, name)

    def _remember_extras(self) -> None:
        """Copy the backend's descriptive attributes (GPU `cost_sources`, `framework`, `engine_release`) into the
        table."""
        if self._inner is None:
            return
        meta = self._table["meta"]
        for name in _REMEMBERED:  # None (an LPX backend has no cost_sources) is remembered too
            value = getattr(self._inner, name, None)
            value = dict(value) if isinstance(value, dict) else list(value) if isinstance(value, tuple) else value
            if name not in meta or meta[name] != value:  # stored as JSON keeps it (a tuple as a list)
                meta[name] = value
                self._dirty = True

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_inner"} | {"_inner": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    # --- the table ----------------------------------------------------------------------------
    def _meta(self) -> dict[str, Any]:
        meta = self._table["meta"]
        if not meta:
            m = self.inner
            meta.update(name=m.name, chips=int(m.chips), power_w=float(m.power_w),
                        kv_capacity_bytes=float(m.kv_capacity_bytes()), max_batch=int(m.max_batch()))
            self._dirty = True
        return meta

    def _lookup(self, section: str, key: str, compute: Callable[[], StepCost]) -> StepCost:
        table = self._table[section]
        hit = table.get(key)
        if hit is None:
            try:
                cost = compute()
                hit = [float(cost.latency_s), float(cost.interval_s)]
            except DoesNotFit as e:
                hit = ["!", e.field, e.message]
            table[key] = hit
            stats.priced += 1
            self._dirty = True
            _on_exit()
        else:
            stats.answered += 1
        if hit[0] == "!":
            raise DoesNotFit(hit[1], hit[2])
        return StepCost(hit[0], hit[1])

    def flush(self) -> None:
        """Write the table to the step cache if it gained entries (merged with what another process wrote)."""
        self._remember_extras()
        if not (self._persist and self._dirty):
            return
        self._dirty = False
        cache = step_cache()
        if cache.enabled:
            cache._memory.pop(self._key, None)  # re-read the disk: another process may have added shapes
            theirs = _valid(cache.get(self._key, is_table))
            if theirs is not None:
                for section, entries in theirs.items():
                    for k, v in entries.items():
                        self._table[section].setdefault(k, v)
        table = {s: (e if len(e) <= _TABLE_LIMIT else dict(list(e.items())[:_TABLE_LIMIT]))
                 for s, e in self._table.items()}
        cache.put(self._key, table)

    # --- the StepModel protocol -------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._meta()["name"]

    @property
    def chips(self) -> int:
        return self._meta()["chips"]

    @property
    def power_w(self) -> float:
        return self._meta()["power_w"]

    def kv_capacity_bytes(self) -> float:
        return self._meta()["kv_capacity_bytes"]

    def max_batch(self) -> int:
        return self._meta()["max_batch"]

    def kv_bytes(self, context: int) -> float:
        table = self._table["kv"]
        key = str(int(context))
        b = table.get(key)
        if b is None:
            b = table[key] = float(self.inner.kv_bytes(context))
            self._dirty = True
        return b

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        return self._lookup("decode", _ctx_key(batch.contexts), lambda: self.inner.decode_step(batch))

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        key = f"{chunk.tokens},{chunk.context},{chunk.sequences}"
        return self._lookup("prefill", key, lambda: self.inner.prefill(chunk))

    def verify(self, batch: DecodeBatch, k: int) -> StepCost:
        if k < 0:  # argument errors are not shapes: let the backend say it
            return self.inner.verify(batch, k)
        return self._lookup("verify", f"{k}:{_ctx_key(batch.contexts)}", lambda: self.inner.verify(batch, k))


_SECTIONS = ("meta", "decode", "prefill", "verify", "kv")
_META_TYPES = {"name": (str,), "chips": (int,), "power_w": (int, float), "kv_capacity_bytes": (int, float),
               "max_batch": (int,)}


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0  # NaN fails; inf is a cost


def _cost_entry(v: Any) -> bool:
    """[latency_s, interval_s] (finite, >= 0) or a remembered refusal ["!", field, message]."""
    if not isinstance(v, list):
        return False
    if len(v) == 3 and v[0] == "!":
        return isinstance(v[1], str) and isinstance(v[2], str)
    return len(v) == 2 and _number(v[0]) and _number(v[1])


def is_table(stored: Any) -> bool:
    """Whether a stored value is shaped like a step table, down to every entry (a value of the wrong
    type or shape, e.g. a string where a cost pair belongs, would fail later with a TypeError)."""
    if not (isinstance(stored, dict) and all(isinstance(stored.get(s), dict) for s in _SECTIONS)):
        return False
    meta = stored["meta"]
    if meta and not all(isinstance(meta.get(k), t) and not isinstance(meta.get(k), bool)
                        for k, t in _META_TYPES.items()):
        return False
    return (all(_cost_entry(v) for s in ("decode", "prefill", "verify") for v in stored[s].values())
            and all(_number(v) for v in stored["kv"].values()))


def _valid(stored: Any) -> dict[str, dict[str, Any]] | None:
    """A stored table, or None when it is missing or not shaped like one (then it is rebuilt)."""
    if is_table(stored):
        return {s: dict(stored[s]) for s in _SECTIONS}
    return None


# --- one wrapper per replica per process ----------------------------------------------------------

_REGISTRY: dict[str, MemoStepModel] = {}


def table_key(identity: tuple[Any, ...]) -> str:
    """The step-cache key of a replica's table: its identity and the source of the cost models.
    A pydantic spec enters as the hash of its JSON (pydantic's serializer: far faster than walking it)."""
    parts = [hashlib.sha256(p.model_dump_json().encode()).hexdigest() if hasattr(p, "model_dump_json") else p
             for p in identity]
    return digest(NAMESPACE, source_version(*COST_PACKAGES), *parts)


def memoized(build: Callable[[], StepModel], identity: tuple[Any, ...]) -> MemoStepModel:
    """The process's wrapper for the replica `identity` (built by `build` when first needed)."""
    key = table_key(identity)
    hit = _REGISTRY.get(key)
    if hit is None:
        hit = MemoStepModel(build, key)
        if len(_REGISTRY) >= _REGISTRY_SIZE:
            _REGISTRY.pop(next(iter(_REGISTRY))).flush()
        _REGISTRY[key] = hit
    return hit


def flush_all() -> None:
    """Persist every table of this process (run at exit; also callable by long-lived workers)."""
    for m in list(_REGISTRY.values()):
        m.flush()


def reset() -> None:
    """Forget this process's wrappers and counters (tests)."""
    flush_all()
    _REGISTRY.clear()
    stats.built = stats.priced = stats.answered = 0


def _on_exit() -> None:
    """Write the tables when this process ends (interpreter exit, or a multiprocessing worker's exit)."""
    flush_at_exit(flush_all)

