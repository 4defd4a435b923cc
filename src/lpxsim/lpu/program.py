"""The compiled LPX Program: what every chip holds, does and sends, cycle by cycle.

A `Program` is the output of the LPX compiler (partition -> place -> route ->
schedule) and the input of the verifier, the timing summary, the trace writer
and the numpy emulator (`lpxsim.lpu.emulate`). It is plain data and
JSON-serialisable (`to_dict` / `from_dict`). Everything the emulator needs to
reproduce the model's numerics is stated here explicitly; nothing is implied
by chip position.

Tensors and buffers
-------------------
Activations are row-major ``[M, width]`` with ``M`` = the step's rows (batch x
new tokens per sequence, in sequence-major order: all new tokens of sequence 0,
then sequence 1, ...). A `Buffer` is one tensor living on one chip. It is a
piece of the output of a graph op (`Buffer.op`):

- ``cols = (lo, hi)``: the buffer holds output columns ``lo:hi`` of the op's
  output ``[M, width]`` (``None`` = all columns). For ops with a head structure
  (q/k/v projections, q/k norms, rope, attention) columns are head-major:
  heads ``h0:h1`` of size ``d`` are columns ``h0*d:h1*d``. For the fused
  ``gate_up`` matmul (``attrs["fused"] == ("gate", "up")``) columns index the
  *intermediate* dimension and the buffer holds ``[gate[:, lo:hi] | up[:, lo:hi]]``
  (width ``2*(hi-lo)``, gate half first); the gated activation then consumes it
  and outputs columns ``lo:hi`` of the intermediate activation.
  The ``rope`` op outputs ``[q heads | k heads]`` concatenated: its buffer holds
  q columns ``attrs["q_cols"]`` then k columns ``attrs["k_cols"]``.
- ``partial``: ``None`` for a final value; ``"sum"`` when the buffer is one
  addend of the true value (row-split matmul, expert subset, vocab-split
  embedding gather) and must be summed with its siblings by a ``reduce``;
  ``"lse"`` for split-K attention: the buffer holds the attention output of its
  heads normalised over its key chunk only, plus a log-sum-exp per (row, head)
  (``Buffer.lse_shape``), to be merged by a ``combine``;
  ``"argmax"`` for a vocab slice's (max logit, global token index) pair per row.

Instructions (per chip, on a functional unit, with cycles)
----------------------------------------------------------
``Instruction.kind`` is either a graph op kind (numerics exactly those of the
op in `lpxsim.graph`, restricted to ``Instruction.slice``) or one of the
collective kinds below. ``slice`` keys (all half-open ``(lo, hi)``):

- ``rows``: weight rows = input columns used (matmul ``[K, N]`` weight with
  ``K`` rows). A row-split matmul reads input columns ``rows`` and produces a
  ``"sum"`` partial of the full output columns ``cols``.
- ``cols``: weight columns = output columns produced (head-major, see above).
- ``heads`` / ``kv_heads``: query heads and KV heads an attention, kv_write,
  rope or norm instruction covers. When several chips cover the same KV heads
  (the split is finer than the KV heads), each holds a replica of that KV.
- ``kv_stripe``: ``(index, count)``: this chip's fixed share of each stream's
  KV when a layer's KV is split along the sequence over ``count`` holders
  (``kv_seq_split`` chips of a stage, times the KV helpers of ``kv_spread``).
  It holds the positions ``p`` with ``(p // block) % count == index``, where
  ``block = attrs["kv_block"]`` (``LayoutInfo.kv_block``, default 1): fixed
  blocks striped round-robin, so the ownership of a position never depends on
  the step's context (a deployment's decode steps at growing contexts agree)
  and every holder's share stays balanced to within a block. kv_write stores
  only the new positions it owns; attention reads only those (see
  `stripe_positions`). An attention with ``count > 1`` produces an ``"lse"``
  partial. Absent: the chip holds every position.
- ``kv_seq``: optional further bound ``lo:hi`` on the key positions a
  kv_write stores and an attention reads (intersected with ``kv_stripe``);
  an attention whose ``kv_seq`` cuts an attended key produces an ``"lse"``
  partial. Sliding-window layers attend to the last ``window`` keys of each
  sequence; the chip's share is intersected with that window.
- ``experts``: routed experts ``lo:hi`` of a MoE ``experts`` op: the chip
  computes ``sum_{e in top_k(x), lo <= e < hi} gate_e(x) * expert_e(x)`` (a
  ``"sum"`` partial unless it covers all experts).
- ``vocab``: embedding rows (token ids) ``lo:hi``: ``embed`` gathers rows of
  token ids inside the range and writes zeros elsewhere (a ``"sum"`` partial),
  ``logits`` computes vocab columns ``lo:hi``, ``sample`` takes the argmax over
  that slice (an ``"argmax"`` partial).

KV helpers (``LayoutInfo.kv_spread > 0``): ``kv_write`` and ``attention``
instructions of a full-attention layer may also run on chips of *other*
stages. Such a helper holds a further key stripe (its own ``kv_stripe``) for the
heads of one owner chip, works on transferred copies of the owner's inputs
(the rope output and the K/V source), and sends its ``"lse"`` partial back,
where a ``combine`` in ``"merge"`` mode folds it into the owner's.

Collective kinds (``op`` names the graph op whose value they assemble):

- ``reduce``: output = sum of the input ``"sum"`` partials (``argmax`` variant:
  ``attrs["fn"] == "argmax"`` keeps the pair with the largest logit, lowest
  index on ties).
- ``concat``: output = the inputs' column ranges placed side by side; the
  output's ``cols`` is the union (``attrs["parts"]`` lists each input's cols).
- ``combine``: split-K attention merge: ``lse = logsumexp_j lse_j``,
  ``o = sum_j exp(lse_j - lse) * o_j`` per (row, head). ``attrs["mode"]``:
  ``"merge"`` (default) merges every input's ``(o_j, lse_j)``; the output is
  again an ``"lse"`` partial if its ``partial`` says so, else the final value.
  ``"rescale"``: ``inputs[0]`` is this chip's own ``(o_own, lse_own)``, the
  others (listed in ``attrs["stats_only"]``) carry only sibling chips'
  ``lse_j``; the output is the ``"sum"`` partial ``exp(lse_own - lse) * o_own``
  (o_proj is linear, so its all-reduce then also sums over the chunks).
  A transfer whose ``bytes`` are smaller than an ``"lse"`` source buffer's
  carries only the log-sum-exp statistics (4 bytes per row and head).
- ``copy``: output = input (used to re-name a received buffer).
- ``kv_read``: output = the KV its chip holds of the stripe ``slice["kv_stripe"]`` (with
  ``attrs["kv_block"]``), KV heads ``slice["kv_heads"]``, every position of each stream up to the step's end
  (its input is the chip's ``kv_write`` of this step), for another chip to attend over. ``op`` names the
  attention it serves. An attention with ``attrs["kv_from"]`` (a tuple of ``(index, count)`` stripes)
  reads the first from its own chip's store and the others from its inputs after the first two, one per
  ``kv_read`` output received, in order; together they make up its ``kv_stripe`` share
  (`lpxsim.lpu.emit_gather`: a prefill on a ``kv_spread`` layout gathers the helpers' stripes).

Transfers
---------
A `Transfer` copies ``src_buffer`` on ``src_chip`` to a new buffer
``dst_buffer`` on ``dst_chip`` along ``links`` (source-routed, in order;
intermediate chips forward without storing). It occupies each link direction
from ``send_cycle + i * hop_cycles`` for ``ser_cycles`` (serialisation of its
bytes). ``arrive_cycle`` is when its first 320-byte vector is in the
destination SRAM, ``end_cycle`` when the last one is; a consumer may start at
``arrive_cycle`` (vector streaming) but not finish before ``end_cycle``.

``Program.transfers`` is a `TransferTable`: the same records held as columns
(an ``array`` per integer field: 4-byte for the fields a compile bounds, ids,
chips, bytes and serialisation cycles, 8-byte for cycles; the buffer ids as
lists of the compiler's str objects, and a route index per transfer into the
table's distinct ``links`` tuples), so a large program (~3.5 x 10^5 transfers)
keeps no object per transfer. It is a ``Sequence[Transfer]``: indexing and iteration
build `Transfer` values on demand, ``append`` and item assignment take them,
and a list of transfers given to a `Program` becomes a table. The Scheduler
writes the columns directly; verify and the timing summary read them as
zero-copy numpy views (`TransferTable.column`, `TransferTable.hops`). The JSON
form is unchanged (a list of transfer objects). ``Program.regions`` is likewise a
`RegionTable` (~10^5 regions: chip, offset and size columns, names and kinds as
codes into their distinct strs), written by placement and read by verify as
columns; its JSON form is a list of region objects.

``Program.instructions`` is an `InstructionTable`, held the same way: typed columns for the chip and the
cycles, the unit, op, kind, slice and attrs as indices into lists of their distinct values (the slice and
attrs dicts the compiler shares, kept by identity), the output and the inputs (one flat list) as the
compiler's str objects. Indexing and iteration build `Instruction` values on demand; a list of instructions
given to a `Program` becomes a table; the JSON form is unchanged (a list of instruction objects).

Cycles are of one global clock at ``Program.clock_hz``.
"""

from __future__ import annotations

import copy
import json
import operator
from array import array
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain, repeat
from typing import Any, Literal

import numpy as np

Unit = Literal["MXM", "VXM", "SXM", "MEM"]
RegionKind = Literal["weights", "kv", "act", "buffer"]
Partial = Literal["sum", "lse", "argmax"] | None
Range = tuple[int, int]

COLLECTIVE_KINDS = ("reduce", "concat", "combine", "copy", "kv_read")

# Region, Buffer, Instruction and Transfer are values: treat them as immutable. They are not declared
# frozen because a compile builds ~10^5 of them and a frozen dataclass's __init__ costs about 5x a plain
# one (object.__setattr__ per field); unsafe_hash keeps them hashable exactly as frozen ones were.


@dataclass(slots=True, unsafe_hash=True)
class Region:
    """A contiguous SRAM region of one chip: ``[offset_bytes, offset_bytes + size_bytes)``."""

    chip: int
    name: str
    kind: RegionKind
    offset_bytes: int
    size_bytes: int

    @property
    def end_bytes(self) -> int:
        return self.offset_bytes + self.size_bytes


@dataclass(slots=True, unsafe_hash=True)
class Buffer:
    """One tensor on one chip: columns ``cols`` of graph op ``op``'s output (see module doc)."""

    id: str
    chip: int
    op: str
    cols: Range | None = None
    partial: Partial = None
    bytes: int = 0
    region: str = ""  # name of the Region on `chip` that holds it
    heads: Range | None = None  # attention-shaped buffers: which query heads
    lse_shape: tuple[int, ...] = ()  # "lse" partials: (rows, heads)
    offset_bytes: int = 0  # offset inside `region`; buffers share bytes only with disjoint lifetimes


_BUFFER_COLUMNS = ("chip", "bytes", "offset", "op", "region", "form")


class BufferTable(MutableMapping[str, Buffer]):
    """The declared buffers as columns, keyed by id: a ``dict[str, Buffer]`` that holds no object per buffer.

    A large program has ~5 x 10^5 buffers; a `Buffer` object is ~110 B with its own ints, and a dict of them
    another entry each. Here a buffer is a row: ``index`` maps its key to the row; ``chip``, ``bytes`` and
    ``offset`` are typed integer columns; ``op`` and ``region`` index ``names`` (each distinct str once), and
    ``form`` indexes ``forms``, the distinct ``(cols, partial, heads, lse_shape)`` (~10^3 on DeepSeek-V3: the
    chips of a stage and the layers share them; values equal under ``==`` share one form). Reading a key builds a
    `Buffer` on demand; assigning one writes its row (a new key is appended, an existing one keeps its position:
    dict semantics, also for iteration order and equality). The compiler writes rows directly (`add`,
    `add_many`) and reads single fields without building a value (`bytes_of`, `partial_of`). A row's
    `Buffer.id` is its key unless a value with another id was assigned (kept aside: only hand-made or corrupted
    programs do that)."""

    __slots__ = ("_index", "ids", "chip", "bytes", "offset", "op", "region", "form", "names", "forms", "_name_ids",
                 "_form_ids", "_other_ids")

    def __init__(self, items: Mapping[str, Buffer] | Iterable[tuple[str, Buffer]] = ()) -> None:
        self._index: dict[str, int] | None = {}
        self.ids: list[str] = []
        self.chip = array("q")
        self.bytes = array("q")
        self.offset = array("q")
        self.op = array("i")  # index into `names`
        self.region = array("i")  # index into `names` (0: "", not placed)
        self.form = array("i")  # index into `forms`
        self.names: list[Any] = [""]
        self.forms: list[tuple[Any, Any, Any, Any]] = []
        self._name_ids: dict[Any, int] = {"": 0}
        self._form_ids: dict[tuple[Any, Any, Any, Any], int] = {}
        self._other_ids: dict[int, str] = {}  # row -> Buffer.id where it differs from the key
        for key, b in items.items() if isinstance(items, Mapping) else items:
            self[key] = b

    @property
    def index(self) -> dict[str, int]:
        """Key -> row. A table made by `permuted` (a placed program's) builds it on first use: ~5 x 10^5 keys
        cost ~35 MB, and the verifier matches names without it."""
        if self._index is None:
            self._index = dict(zip(self.ids, range(len(self.ids)), strict=True))
        return self._index

    # --- interning ----------------------------------------------------------------------
    def name_id(self, v: Any) -> int:
        """The index of op or region name `v` in `names` (added if new). Keyed with the type for numbers (a
        hand-made program's 1, 1.0 and True stay apart); an unhashable value is stored without sharing."""
        key = (type(v), v) if isinstance(v, (int, float)) else v
        try:
            k = self._name_ids.get(key)
        except TypeError:
            self.names.append(v)
            return len(self.names) - 1
        if k is None:
            k = self._name_ids[key] = len(self.names)
            self.names.append(v)
        return k

    def form_id(self, cols: Range | None = None, partial: Partial = None, heads: Range | None = None,
                lse_shape: tuple[int, ...] = ()) -> int:
        """The index of ``(cols, partial, heads, lse_shape)`` in `forms` (added if new; an unhashable one is
        stored without sharing)."""
        key = (cols, partial, heads, lse_shape)
        try:
            k = self._form_ids.get(key)
        except TypeError:
            self.forms.append(key)
            return len(self.forms) - 1
        if k is None:
            k = self._form_ids[key] = len(self.forms)
            self.forms.append(key)
        return k

    # --- writing ------------------------------------------------------------------------
    def add(self, bid: str, chip: int, op: str, nbytes: int, cols: Range | None = None, partial: Partial = None,
            heads: Range | None = None, lse_shape: tuple[int, ...] = ()) -> int:
        """Declare a new buffer `bid` (not placed yet: no region, offset 0); returns its row. A key declared
        already is an error (the compiler declares each buffer once)."""
        f = self._form_ids.get((cols, partial, heads, lse_shape))
        if f is None:
            f = self.form_id(cols, partial, heads, lse_shape)
        o = self._name_ids.get(op)
        if o is None:
            o = self.name_id(op)
        return self.add_row(bid, chip, nbytes, o, f)

    def add_row(self, bid: str, chip: int, nbytes: int, op: int, form: int) -> int:
        """`add` with the op and form given as indices (`name_id`, `form_id`); returns the row."""
        k = len(self.ids)
        index = self._index
        if index is None:
            index = self.index
        if index.setdefault(bid, k) != k:
            raise KeyError(f"buffer {bid} is declared twice")
        self.ids.append(bid)
        self.chip.append(chip)
        self.bytes.append(nbytes)
        self.offset.append(0)
        self.op.append(op)
        self.region.append(0)
        self.form.append(form)
        return k

    def add_many(self, bids: list[str], chips: Iterable[int], nbytes: int, op: int, form: int) -> None:
        """Declare new buffers that differ only in id and chip (an all-reduce's received partials); `op` and
        `form` as indices (`name_id`, `form_id`)."""
        index, k0, n = self.index, len(self.ids), len(bids)
        index.update(zip(bids, range(k0, k0 + n), strict=True))
        if len(index) != k0 + n:
            raise KeyError("buffers declared twice: " + ", ".join(sorted(set(bids) & set(self.ids))))
        self.ids.extend(bids)
        self.chip.extend(chips)
        self.bytes.extend(repeat(nbytes, n))
        self.offset.extend(repeat(0, n))
        self.op.extend(repeat(op, n))
        self.region.extend(repeat(0, n))
        self.form.extend(repeat(form, n))

    def __setitem__(self, key: str, b: Buffer) -> None:
        op, form = self.name_id(b.op), self.form_id(b.cols, b.partial, b.heads, b.lse_shape)
        k = self.index.get(key)
        if k is None:
            k = self.add_row(key, b.chip, b.bytes, op, form)
        else:
            self.chip[k], self.bytes[k], self.op[k], self.form[k] = b.chip, b.bytes, op, form
        self.region[k], self.offset[k] = self.name_id(b.region), b.offset_bytes
        if b.id is not key and b.id != key:
            self._other_ids[k] = b.id
        else:
            self._other_ids.pop(k, None)

    def __delitem__(self, key: str) -> None:
        k = self.index.pop(key)  # rare (hand-edited programs): the later rows move up one
        for name in ("ids", *_BUFFER_COLUMNS):
            del getattr(self, name)[k]
        for j in range(k, len(self.ids)):
            self.index[self.ids[j]] = j
        self._other_ids = {j - (j > k): v for j, v in self._other_ids.items() if j != k}

    # --- reading ------------------------------------------------------------------------
    def row(self, k: int) -> Buffer:
        """The buffer at row `k`."""
        names = self.names
        cols, partial, heads, lse = self.forms[self.form[k]]
        return Buffer(self._other_ids.get(k, self.ids[k]) if self._other_ids else self.ids[k], self.chip[k],
                      names[self.op[k]], cols, partial, self.bytes[k], names[self.region[k]], heads, lse,
                      self.offset[k])

    def __getitem__(self, key: str) -> Buffer:
        return self.row(self.index[key])

    def bytes_of(self, key: str) -> int:
        """`self[key].bytes`, without building the value."""
        index = self._index
        return self.bytes[(self.index if index is None else index)[key]]

    def partial_of(self, key: str) -> Partial:
        """`self[key].partial`, without building the value."""
        return self.forms[self.form[self.index[key]]][1]

    def __contains__(self, key: object) -> bool:
        return key in self.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def values_at(self, name: str) -> list[Any]:
        """Field `name` (op, region, cols, partial, heads, lse_shape) of every row, in row order."""
        if name in ("op", "region"):
            return list(map(self.names.__getitem__, getattr(self, name)))
        at = ("cols", "partial", "heads", "lse_shape").index(name)
        return [f[at] for f in map(self.forms.__getitem__, self.form)]

    def column(self, name: str) -> np.ndarray:
        """A numpy copy of an integer column: chip, bytes, offset, or the codes op, region, form."""
        return np.array(getattr(self, name), np.int64 if name in ("chip", "bytes", "offset") else np.int32)

    def permuted(self, order: Iterable[int], region: Sequence[int] | None = None,
                 offset: Sequence[int] | None = None, consume: bool = False) -> BufferTable:
        """A new table with the rows `order` (each row once), in that order; `region` (`name_id` indices) and
        `offset`, when given, replace those columns (indexed by the old rows). `consume`: this table is emptied
        column by column as the new one is filled (peak memory: placement's ~5 x 10^5 rows)."""
        if not isinstance(order, (np.ndarray, array)):
            order = list(order)
        ids = self.ids
        out = BufferTable()
        out.names, out.forms, out._name_ids, out._form_ids = self.names, self.forms, self._name_ids, self._form_ids
        out.ids = list(map(ids.__getitem__, order))  # an int at a time (a list of them all: ~15 MB more)
        order = np.frombuffer(order, np.int64) if isinstance(order, array) and order.typecode == "q" else (
            np.asarray(order, np.int64))
        n = len(order)
        out._index = None  # built on first use (`index`)
        if consume:  # emptied in place: a caller may still hold this table (or its index, e.g. a ready table)
            self.ids = []
            if self._index is not None:
                self._index.clear()
        for name in _BUFFER_COLUMNS:
            src = {"region": region, "offset": offset}.get(name)
            typ, dtype = ("q", np.int64) if name in ("chip", "bytes", "offset") else ("i", np.int32)
            col = array(typ, bytes(n * np.dtype(dtype).itemsize))
            np.take(np.asarray(getattr(self, name) if src is None else src), order, out=np.frombuffer(col, dtype))
            setattr(out, name, col)
            if consume:
                setattr(self, name, array(typ))
        if self._other_ids:
            new_row = {k: j for j, k in enumerate(order.tolist())}
            out._other_ids = {new_row[k]: v for k, v in self._other_ids.items() if k in new_row}
            if consume:
                self._other_ids = {}
        return out

    def __eq__(self, other: object) -> bool:  # as dicts compare: the same keys and values, in any order
        if isinstance(other, Mapping):
            return len(self) == len(other) and all(k in other and self[k] == other[k] for k in self)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BufferTable({len(self)} buffers)"


@dataclass(slots=True, unsafe_hash=True)
class Instruction:
    """One op (or collective) on one chip's functional unit.

    ``cycle_start``: first input vector consumed; ``first_out_cycle``: first
    output vector ready (consumers may start then); ``cycle_end``: last output
    vector written.
    """

    id: int
    chip: int
    unit: Unit
    op: str
    kind: str
    inputs: tuple[str, ...]
    output: str
    cycle_start: int
    first_out_cycle: int
    cycle_end: int
    slice: Mapping[str, Range] = field(default_factory=dict)
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Link:
    """A physical C2C link between chips ``a`` < ``b``; direction 0 is a->b, 1 is b->a."""

    id: int
    a: int
    b: int
    cls: str  # link class role in the topology: intra_node, inter_node, inter_rack
    bytes_per_cycle: float  # per direction
    hop_cycles: int  # first-bit latency, SRAM to SRAM


@dataclass(slots=True, unsafe_hash=True)
class Transfer:
    """A tensor sent chip to chip over a fixed, source-routed path with reserved cycles."""

    id: int
    src_chip: int
    dst_chip: int
    src_buffer: str
    dst_buffer: str
    bytes: int
    links: tuple[tuple[int, int], ...]  # (link id, direction) in path order
    send_cycle: int
    ser_cycles: int  # cycles each link direction is occupied
    arrive_cycle: int  # first vector in destination SRAM
    end_cycle: int  # last vector in destination SRAM

    def link_windows(self, hop_cycles: Mapping[int, int]) -> list[tuple[int, int, int, int]]:
        """(link, direction, first cycle, last cycle + 1) this transfer reserves on each link."""
        out, t = [], self.send_cycle
        for lid, d in self.links:
            out.append((lid, d, t, t + self.ser_cycles))
            t += hop_cycles[lid]
        return out


_INT_COLUMNS = ("id", "src_chip", "dst_chip", "bytes", "send_cycle", "ser_cycles", "arrive_cycle", "end_cycle")
# 4-byte columns: values a compile bounds (chips, the record's index and route index; a transfer's bytes, and
# its serialisation cycles at >= 1 byte per cycle, are at most one buffer, which placement fits in a chip's SRAM:
# 500 MB on LPX). Cycles stay 8-byte: a long prefill may pass 2^31 cycles. A column given a value past its type
# (a JSON-loaded program, or a SRAM set past 2 GiB) is widened to 8 bytes (`_extend`, `_set`): nothing is lost.
_NARROW = frozenset(("id", "src_chip", "dst_chip", "bytes", "ser_cycles", "route"))
_DTYPES = {"b": np.int8, "i": np.int32, "q": np.int64}  # array typecode -> the numpy type of its view


def _extend(table: object, name: str, values: Iterable[int]) -> None:
    """Append `values` to `table`'s integer column `name` (an array), widened to int64 first when a value does
    not fit its narrower type."""
    col = getattr(table, name)
    if col.typecode == "q":
        col.extend(values.tolist() if isinstance(values, array) and values.typecode != "q" else values)
        return
    tv = type(values)
    if tv is list or tv is tuple or tv is range:  # the compiler's own (no ABC check on the hot path)
        pass
    elif isinstance(values, Iterator):  # read twice if the column must be widened
        values = list(values)
    elif isinstance(values, array) and values.typecode != col.typecode:  # array.extend takes one typecode
        values = values.tolist()
    n = len(col)
    try:
        col.extend(values)
    except OverflowError:
        del col[n:]
        wide = array("q", col)
        wide.extend(values.tolist() if isinstance(values, array) else values)
        setattr(table, name, wide)


def _set(table: object, name: str, k: int, value: int) -> None:
    """Item `k` of `table`'s integer column `name` set to `value` (the column widened to int64 if needed)."""
    col = getattr(table, name)
    try:
        col[k] = value
    except OverflowError:
        col = array("q", col)
        col[k] = value
        setattr(table, name, col)


def _view(col: array) -> np.ndarray:
    """A zero-copy numpy view of an integer column, of its own width."""
    return np.frombuffer(col, _DTYPES[col.typecode])


class TransferTable(Sequence[Transfer]):
    """The transfers of a Program as columns: one typed column per `Transfer` field, no object per record.

    Integer fields are `array` columns (`column(name)` is a zero-copy numpy view: int32 for the bounded fields
    of `_NARROW`, int64 for cycles and for a column given a value past int32), the buffer ids
    are lists of the str objects the compiler made (so verify can match them by identity), and ``links`` is
    a route index into `routes`, the distinct link paths (a large program has ~10^5 transfers over a few
    thousand routes). It behaves as a ``Sequence[Transfer]``: ``len``, index -> a `Transfer` value built on
    demand, iteration, slicing (a table), ``append`` / ``extend`` of `Transfer` values, item assignment, and
    equality with any sequence of transfers. The Scheduler writes it through `add_many` without records."""

    __slots__ = (*_INT_COLUMNS, "src_buffer", "dst_buffer", "route", "routes", "_route_ids", "_exported")

    def __init__(self, records: Iterable[Transfer] = ()) -> None:
        for name in (*_INT_COLUMNS, "route"):
            setattr(self, name, array("i" if name in _NARROW else "q"))
        self.src_buffer: list[str] = []
        self.dst_buffer: list[str] = []
        self.routes: list[tuple[tuple[int, int], ...]] = []
        self._route_ids: dict[tuple[tuple[int, int], ...], int] = {}
        self._exported = False  # numpy views of the integer columns may be alive (`column`)
        self.extend(records)

    def _own(self) -> None:
        """Fresh integer columns before a write: an array numpy views export cannot grow, and the views keep
        what they saw."""
        for name in (*_INT_COLUMNS, "route"):
            col = getattr(self, name)
            setattr(self, name, array(col.typecode, col))
        self._exported = False

    # --- writing ----------------------------------------------------------------------
    def route_id(self, links: tuple[tuple[int, int], ...]) -> int:
        """The index of route `links` in `routes` (added if new)."""
        rid = self._route_ids.get(links)
        if rid is None:
            rid = self._route_ids[links] = len(self.routes)
            self.routes.append(links)
        return rid

    def _route_of(self, links: Iterable[Iterable[int]]) -> int:
        """`route_id` of any sequence of (link, direction) pairs; a new route is stored as int tuples."""
        try:
            rid = self._route_ids.get(links)  # type: ignore[call-overload]
        except TypeError:  # lists (e.g. from JSON): not hashable
            rid = None
        return self.route_id(tuple((int(a), int(b)) for a, b in links)) if rid is None else rid

    def add_many(self, ids: Iterable[int], src_chip: Iterable[int], dst_chip: Iterable[int],
                 src_buffer: Iterable[str], dst_buffer: Iterable[str], nbytes: Iterable[int], route: Iterable[int],
                 send_cycle: Iterable[int], ser_cycles: Iterable[int], arrive_cycle: Iterable[int],
                 end_cycle: Iterable[int]) -> None:
        """Append records given column by column (equal lengths); `route`: indices from `route_id`."""
        if self._exported:
            self._own()
        for name, values in (("id", ids), ("src_chip", src_chip), ("dst_chip", dst_chip), ("bytes", nbytes),
                             ("route", route), ("send_cycle", send_cycle), ("ser_cycles", ser_cycles),
                             ("arrive_cycle", arrive_cycle), ("end_cycle", end_cycle)):
            _extend(self, name, values)
        self.src_buffer.extend(src_buffer)
        self.dst_buffer.extend(dst_buffer)

    def add(self, tid: int, src_chip: int, dst_chip: int, src_buffer: str, dst_buffer: str, nbytes: int,
            route: int, send_cycle: int, ser_cycles: int, arrive_cycle: int, end_cycle: int) -> None:
        """Append one record given by its fields (`route`: an index from `route_id`)."""
        if self._exported:
            self._own()
        n = len(self.id)
        try:
            self.id.append(tid)
            self.src_chip.append(src_chip)
            self.dst_chip.append(dst_chip)
            self.bytes.append(nbytes)
            self.route.append(route)
            self.send_cycle.append(send_cycle)
            self.ser_cycles.append(ser_cycles)
            self.arrive_cycle.append(arrive_cycle)
            self.end_cycle.append(end_cycle)
        except OverflowError:  # a value past a narrow column: undone, then appended through `_extend`
            for name in (*_INT_COLUMNS, "route"):
                del getattr(self, name)[n:]
            self.add_many((tid,), (src_chip,), (dst_chip,), (), (), (nbytes,), (route,), (send_cycle,),
                          (ser_cycles,), (arrive_cycle,), (end_cycle,))
        self.src_buffer.append(src_buffer)
        self.dst_buffer.append(dst_buffer)

    def append(self, t: Transfer) -> None:
        """Append one transfer value."""
        self.extend((t,))

    def extend(self, records: Iterable[Transfer]) -> None:
        """Append transfer values in order."""
        rows = [(t.id, t.src_chip, t.dst_chip, t.src_buffer, t.dst_buffer, t.bytes, self._route_of(t.links),
                 t.send_cycle, t.ser_cycles, t.arrive_cycle, t.end_cycle) for t in records]
        if rows:
            self.add_many(*zip(*rows, strict=True))

    def __setitem__(self, k: int, t: Transfer) -> None:
        if isinstance(k, slice):
            raise TypeError("TransferTable item assignment takes one index")
        k = range(len(self))[k]  # negative indices; IndexError past the end
        if self._exported:
            self._own()
        for name in _INT_COLUMNS:
            _set(self, name, k, getattr(t, name))
        self.src_buffer[k], self.dst_buffer[k] = t.src_buffer, t.dst_buffer
        _set(self, "route", k, self._route_of(t.links))

    # --- reading ----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.id)

    def __getitem__(self, k):  # noqa: ANN001, ANN204 (int -> Transfer, slice -> TransferTable)
        if isinstance(k, slice):
            return TransferTable(self[i] for i in range(len(self))[k])
        return Transfer(self.id[k], self.src_chip[k], self.dst_chip[k], self.src_buffer[k], self.dst_buffer[k],
                        self.bytes[k], self.routes[self.route[k]], self.send_cycle[k], self.ser_cycles[k],
                        self.arrive_cycle[k], self.end_cycle[k])

    def __iter__(self) -> Iterator[Transfer]:
        return map(Transfer, self.id, self.src_chip, self.dst_chip, self.src_buffer, self.dst_buffer, self.bytes,
                   map(self.routes.__getitem__, self.route), self.send_cycle, self.ser_cycles, self.arrive_cycle,
                   self.end_cycle)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TransferTable):
            return (all(getattr(self, n) == getattr(other, n) for n in _INT_COLUMNS)
                    and self.src_buffer == other.src_buffer and self.dst_buffer == other.dst_buffer
                    and self.links() == other.links())
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and all(map(operator.eq, self, other))
        return NotImplemented

    __hash__ = None  # mutable, like a list

    def __repr__(self) -> str:
        return f"TransferTable({len(self)} transfers over {len(self.routes)} routes)"

    def column(self, name: str) -> np.ndarray:
        """Integer column `name` (a `Transfer` field, or ``route``) as a zero-copy numpy view: int32 for the
        fields of `_NARROW` unless a value needed int64, int64 for the rest (widen before arithmetic that may
        pass 2^31)."""
        if name not in _INT_COLUMNS and name != "route":
            raise KeyError(name)
        self._exported = True
        return _view(getattr(self, name))

    def links(self) -> list[tuple[tuple[int, int], ...]]:
        """Each transfer's route (the shared tuples of `routes`)."""
        return list(map(self.routes.__getitem__, self.route))

    def hops(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every hop of every transfer in order: (link id, direction, transfer index) per hop, and the number
        of hops per transfer; expanded from the distinct routes without a pass over the records."""
        m = len(self)
        nr = len(self.routes)
        r_len = np.fromiter(map(len, self.routes), np.int64, nr)
        r_hops = np.fromiter(chain.from_iterable(chain.from_iterable(self.routes)), np.int64,
                             2 * int(r_len.sum())).reshape(-1, 2)
        rid = self.column("route")
        nhops = r_len[rid] if m else np.zeros(0, np.int64)
        total = int(nhops.sum())
        tr = np.repeat(np.arange(m), nhops)
        r_first = np.cumsum(r_len) - r_len  # first hop of each route in r_hops
        within = np.arange(total) - np.repeat(np.cumsum(nhops) - nhops, nhops)
        h = r_hops[r_first[rid][tr] + within] if total else np.zeros((0, 2), np.int64)
        return h[:, 0], h[:, 1], tr, nhops

    def to_dicts(self) -> list[dict[str, Any]]:
        """Each transfer as `dataclasses.asdict` gives it."""
        return [asdict(t) for t in self]


_REGION_KINDS: tuple[str, ...] = ("weights", "kv", "act", "buffer")  # the first kind codes
_REGION_COLUMNS = ("chip", "name", "kind", "offset_bytes", "size_bytes")


class RegionTable(Sequence[Region]):
    """The regions of a Program as columns: no object per region (a large program has ~10^5).

    ``chip`` (int32), ``offset_bytes`` and ``size_bytes`` (int64) are `array` columns (`column(name)`: a
    zero-copy numpy view); ``name`` and ``kind`` are codes into `names` and `kinds`, each distinct str kept
    once (the same weight names repeat on every chip), codes in order of first appearance. A chip past int32 (a
    JSON-loaded program) widens its column to int64. It behaves as a ``Sequence[Region]``: ``len``, index -> a
    `Region` value built on demand, iteration, slicing (a table), ``append`` / ``extend`` of `Region` values,
    item assignment, and equality with any sequence of regions. `place` writes it through `add_block`."""

    __slots__ = ("chip", "name", "kind", "offset_bytes", "size_bytes", "names", "kinds", "_name_ids", "_kind_ids",
                 "_exported")

    def __init__(self, records: Iterable[Region] = ()) -> None:
        self.chip = array("i")
        self.name = array("i")  # index into `names`
        self.kind = array("b")  # index into `kinds`
        self.offset_bytes = array("q")
        self.size_bytes = array("q")
        self.names: list[str] = []
        self.kinds: list[str] = list(_REGION_KINDS)
        self._name_ids: dict[str, int] = {}
        self._kind_ids: dict[str, int] = {k: i for i, k in enumerate(_REGION_KINDS)}
        self._exported = False  # numpy views of the columns may be alive (`column`)
        self.extend(records)

    def _own(self) -> None:
        """Fresh columns before a write (see `TransferTable._own`)."""
        for name in _REGION_COLUMNS:
            col = getattr(self, name)
            setattr(self, name, array(col.typecode, col))
        self._exported = False

    @staticmethod
    def _code(ids: dict[str, int], values: list[str], v: str) -> int:
        """The code of `v` in `values` (added if new)."""
        k = ids.get(v)
        if k is None:
            k = ids[v] = len(values)
            values.append(v)
        return k

    # --- writing ----------------------------------------------------------------------
    def _add_codes(self, chip: Iterable[int], name: Iterable[int], kind: Iterable[int],
                   offset_bytes: Iterable[int], size_bytes: Iterable[int]) -> None:
        """Append regions given column by column (equal lengths), names and kinds as codes."""
        if self._exported:
            self._own()
        for col, values in (("chip", chip), ("name", name), ("kind", kind), ("offset_bytes", offset_bytes),
                            ("size_bytes", size_bytes)):
            _extend(self, col, values)

    def add_block(self, chip: int, kind: str, names: Sequence[str], offsets: Sequence[int],
                  sizes: Sequence[int]) -> None:
        """Append regions of one chip and one kind: ``names[i]`` at ``offsets[i]`` of ``sizes[i]`` bytes."""
        ids = self._name_ids
        codes = list(map(ids.get, names))
        if None in codes:  # names new to the table
            codes = [self._code(ids, self.names, v) for v in names]
        n = len(codes)
        self._add_codes(repeat(chip, n), codes, repeat(self._code(self._kind_ids, self.kinds, kind), n), offsets,
                        sizes)

    def append(self, r: Region) -> None:
        """Append one region value."""
        self.extend((r,))

    def extend(self, records: Iterable[Region]) -> None:
        """Append region values in order."""
        nid, kid, names, kinds, code = self._name_ids, self._kind_ids, self.names, self.kinds, self._code
        rows = [(r.chip, code(nid, names, r.name), code(kid, kinds, r.kind), r.offset_bytes, r.size_bytes)
                for r in records]
        if rows:
            self._add_codes(*zip(*rows, strict=True))

    def __setitem__(self, k: int, r: Region) -> None:
        if isinstance(k, slice):
            raise TypeError("RegionTable item assignment takes one index")
        k = range(len(self))[k]  # negative indices; IndexError past the end
        if self._exported:
            self._own()
        _set(self, "chip", k, r.chip)
        _set(self, "name", k, self._code(self._name_ids, self.names, r.name))
        _set(self, "kind", k, self._code(self._kind_ids, self.kinds, r.kind))
        _set(self, "offset_bytes", k, r.offset_bytes)
        _set(self, "size_bytes", k, r.size_bytes)

    # --- reading ----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.chip)

    def __getitem__(self, k):  # noqa: ANN001, ANN204 (int -> Region, slice -> RegionTable)
        if isinstance(k, slice):
            return RegionTable(self[i] for i in range(len(self))[k])
        return Region(self.chip[k], self.names[self.name[k]], self.kinds[self.kind[k]],  # type: ignore[arg-type]
                      self.offset_bytes[k], self.size_bytes[k])

    def __iter__(self) -> Iterator[Region]:
        return map(Region, self.chip, map(self.names.__getitem__, self.name), map(self.kinds.__getitem__, self.kind),
                   self.offset_bytes, self.size_bytes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (RegionTable, list, tuple)):
            return len(other) == len(self) and all(map(operator.eq, self, other))
        return NotImplemented

    __hash__ = None  # mutable, like a list

    def __repr__(self) -> str:
        return f"RegionTable({len(self)} regions, {len(self.names)} names)"

    def column(self, name: str) -> np.ndarray:
        """Column `name` (``chip``, ``offset_bytes``, ``size_bytes``, or the codes ``name`` / ``kind``) as a
        zero-copy numpy view of its own width (``chip`` int32 unless a chip needed int64)."""
        if name not in _REGION_COLUMNS:
            raise KeyError(name)
        self._exported = True
        return _view(getattr(self, name))

    def to_dicts(self) -> list[dict[str, Any]]:
        """Each region as `dataclasses.asdict` gives it."""
        return [{"chip": c, "name": n, "kind": k, "offset_bytes": o, "size_bytes": z}
                for c, n, k, o, z in zip(self.chip, map(self.names.__getitem__, self.name),
                                         map(self.kinds.__getitem__, self.kind), self.offset_bytes, self.size_bytes,
                                         strict=True)]


_INS_CYCLES = ("cycle_start", "first_out_cycle", "cycle_end")
_INS_CODED = ("unit", "op", "kind", "slice", "attrs")  # fields held as an index into a list of distinct values


def _take(values: list, idx: np.ndarray) -> list:
    """``[values[k] for k in idx]``, through an object array (about twice as fast for ~10^5 strs)."""
    arr = np.empty(len(values), object)
    arr[:] = values
    return arr[idx].tolist()


class InstructionTable(Sequence[Instruction]):
    """The instructions of a Program as columns: no object per instruction (a large program has ~2 x 10^5).

    Cycles are `array("q")` columns and ``chip`` an `array("i")`; ``unit``, ``op``, ``kind``, ``slice`` and
    ``attrs`` are indices (``<field>_code``, `array("i")`) into lists of their distinct values
    (``<field>_values``): the strs by equality, the slice and attrs dicts by identity (the compiler shares
    equal ones, and verify groups work by those objects). ``output`` is a list of the compiler's str objects
    and ``inputs`` one flat list of them (`input_flat`) with each instruction's end in `input_end` (so verify
    matches buffer names by identity). The ids are the positions (``id`` is None) until a record with another
    id is added or the table is permuted; then ``id`` is an `array("q")` column.

    It behaves as a ``Sequence[Instruction]``: ``len``, index -> an `Instruction` value built on demand,
    iteration, slicing (a table), ``append`` / ``extend`` of `Instruction` values, item assignment, and
    equality with any sequence of instructions. The Scheduler writes it through `add` without records."""

    __slots__ = ("id", "chip", "output", "input_flat", "input_end", *_INS_CYCLES,
                 *(f"{f}_code" for f in _INS_CODED), *(f"{f}_values" for f in _INS_CODED), "_ix", "cols")

    def __init__(self, records: Iterable[Instruction] = ()) -> None:
        self.id: array | None = None  # None: every id is its position
        self.chip = array("i")
        self.output: list[str] = []
        self.input_flat: list[str] = []
        self.input_end = array("q")  # input_flat[input_end[k - 1]:input_end[k]] are instruction k's inputs
        for name in _INS_CYCLES:
            setattr(self, name, array("q"))
        for f in _INS_CODED:
            setattr(self, f"{f}_code", array("i"))
            setattr(self, f"{f}_values", [])
        # value -> index per coded field: strs by value, the slice and attrs dicts by identity (their list
        # holds them, so an id is never reused while it is a key)
        self._ix: tuple[dict, ...] = tuple({} for _ in _INS_CODED)
        self._set_cols()
        self.extend(records)

    def _set_cols(self) -> None:
        """`cols`: the columns and code maps in one tuple, for `add` (read afresh per call: `permute` replaces
        the columns)."""
        self.cols = (self.chip, self.output, self.input_flat, self.input_end, self.cycle_start,
                     self.first_out_cycle, self.cycle_end, self.unit_code, self.op_code, self.kind_code,
                     self.slice_code, self.attrs_code, *self._ix)

    def __getstate__(self) -> dict[str, Any]:
        """The columns and values (pickle, deepcopy); the code maps are rebuilt on load, as the slice and attrs
        dicts are keyed by identity."""
        return {name: getattr(self, name) for name in self.__slots__ if name not in ("_ix", "cols")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
        self._ix = tuple({(id(v) if f >= 3 else v): k for k, v in enumerate(getattr(self, f"{name}_values"))}
                         for f, name in enumerate(_INS_CODED))
        self._set_cols()

    # --- writing ----------------------------------------------------------------------
    def _code(self, f: int, value: Any) -> int:
        """The index of `value` in coded field `f`'s values (added if new)."""
        name = _INS_CODED[f]
        key = id(value) if f >= 3 else value
        ix = self._ix[f]
        k = ix.get(key)
        if k is None:
            values = getattr(self, f"{name}_values")
            k = ix[key] = len(values)
            values.append(value)
        return k

    def add(self, chip: int, unit: str, op: str, kind: str, inputs: tuple[str, ...], output: str,
            cycle_start: int, first_out_cycle: int, cycle_end: int, slc: Mapping[str, Range],
            attrs: Mapping[str, Any]) -> int:
        """Append one instruction given by its fields, its id its position; returns its row (= its id)."""
        (c_chip, c_out, c_flat, c_end, c_start, c_first, c_last, c_unit, c_op, c_kind, c_slice, c_attrs,
         x_unit, x_op, x_kind, x_slice, x_attrs) = self.cols
        row = len(c_chip)
        if self.id is not None:
            self.id.append(row)
        k = x_unit.get(unit)
        c_unit.append(self._code(0, unit) if k is None else k)
        k = x_op.get(op)
        c_op.append(self._code(1, op) if k is None else k)
        k = x_kind.get(kind)
        c_kind.append(self._code(2, kind) if k is None else k)
        k = x_slice.get(id(slc))
        c_slice.append(self._code(3, slc) if k is None else k)
        k = x_attrs.get(id(attrs))
        c_attrs.append(self._code(4, attrs) if k is None else k)
        c_chip.append(chip)
        c_out.append(output)
        c_flat.extend(inputs)
        c_end.append(len(c_flat))
        c_start.append(cycle_start)
        c_first.append(first_out_cycle)
        c_last.append(cycle_end)
        return row

    def append(self, ins: Instruction) -> None:
        """Append one instruction value."""
        row = self.add(ins.chip, ins.unit, ins.op, ins.kind, tuple(ins.inputs), ins.output, ins.cycle_start,
                       ins.first_out_cycle, ins.cycle_end, ins.slice, ins.attrs)
        if ins.id != row:  # an id other than the position (e.g. a JSON program's): the ids become a column
            if self.id is None:
                self.id = array("q", range(row + 1))
            self.id[row] = ins.id

    def extend(self, records: Iterable[Instruction]) -> None:
        """Append instruction values in order."""
        for ins in records:
            self.append(ins)

    def __setitem__(self, k: int, ins: Instruction) -> None:
        if isinstance(k, slice):
            raise TypeError("InstructionTable item assignment takes one index")
        n = len(self)
        k = range(n)[k]  # negative indices; IndexError past the end
        if ins.id != k and self.id is None:
            self.id = array("q", range(n))
        if self.id is not None:
            self.id[k] = ins.id
        self.chip[k] = ins.chip
        self.output[k] = ins.output
        for name in _INS_CYCLES:
            getattr(self, name)[k] = getattr(ins, name)
        for f, name in enumerate(_INS_CODED):
            getattr(self, f"{name}_code")[k] = self._code(f, getattr(ins, name))
        a, b = self._input_span(k)
        inputs = tuple(ins.inputs)
        self.input_flat[a:b] = inputs
        d = len(inputs) - (b - a)
        if d:
            end = self.input_end
            for j in range(k, n):
                end[j] += d

    # --- reading ----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.chip)

    def _input_span(self, k: int) -> tuple[int, int]:
        """Where instruction `k`'s inputs lie in `input_flat`."""
        return (self.input_end[k - 1] if k else 0), self.input_end[k]

    def _row(self, k: Any) -> int:
        """Index `k` (any integer, negative from the end) as a row; IndexError past either end."""
        n = len(self.chip)
        k = operator.index(k)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError("InstructionTable index out of range")
        return k

    def __getitem__(self, k):  # noqa: ANN001, ANN204 (int -> Instruction, slice -> InstructionTable)
        if isinstance(k, slice):
            return InstructionTable(self[i] for i in range(len(self))[k])
        k = self._row(k)
        end = self.input_end
        return Instruction(k if self.id is None else self.id[k], self.chip[k], self.unit_values[self.unit_code[k]],
                           self.op_values[self.op_code[k]], self.kind_values[self.kind_code[k]],
                           tuple(self.input_flat[end[k - 1] if k else 0:end[k]]), self.output[k], self.cycle_start[k],
                           self.first_out_cycle[k], self.cycle_end[k], self.slice_values[self.slice_code[k]],
                           self.attrs_values[self.attrs_code[k]])

    def value(self, field_name: str, k: int) -> Any:
        """Instruction `k`'s value of coded field `field_name` (``unit``, ``op``, ``kind``, ``slice``, ``attrs``),
        without building its record."""
        return getattr(self, f"{field_name}_values")[getattr(self, f"{field_name}_code")[self._row(k)]]

    def inputs(self) -> Iterator[tuple[str, ...]]:
        """Each instruction's inputs, in order."""
        flat, end = self.input_flat, self.input_end
        return map(tuple, map(flat.__getitem__, map(slice, chain((0,), end), end)))

    def values(self, field_name: str) -> Iterator[Any]:
        """Each instruction's value of coded field `field_name` (``unit``, ``op``, ``kind``, ``slice``, ``attrs``)."""
        return map(getattr(self, f"{field_name}_values").__getitem__, getattr(self, f"{field_name}_code"))

    def __iter__(self) -> Iterator[Instruction]:
        ids = range(len(self)) if self.id is None else self.id
        v = self.values
        return map(Instruction, ids, self.chip, v("unit"), v("op"), v("kind"), self.inputs(), self.output,
                   self.cycle_start, self.first_out_cycle, self.cycle_end, v("slice"), v("attrs"))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (InstructionTable, list, tuple)):
            return len(other) == len(self) and all(map(operator.eq, self, other))
        return NotImplemented

    __hash__ = None  # mutable, like a list

    def __repr__(self) -> str:
        return f"InstructionTable({len(self)} instructions)"

    def column(self, name: str) -> np.ndarray:
        """Integer column `name` as a new int64 numpy array: ``id``, ``chip``, a cycle field, ``input_end``
        or a coded field's ``<field>_code`` (a copy: writing it leaves the table as it is)."""
        if name == "id" and self.id is None:
            return np.arange(len(self), dtype=np.int64)
        if name not in ("id", "chip", "input_end", *_INS_CYCLES, *(f"{f}_code" for f in _INS_CODED)):
            raise KeyError(name)
        col = getattr(self, name)
        return np.frombuffer(col, np.int64 if col.typecode == "q" else np.int32).astype(np.int64)

    def input_counts(self) -> np.ndarray:
        """The number of inputs of each instruction (int64)."""
        end = self.column("input_end")
        return np.diff(end, prepend=0) if len(end) else end

    def permute(self, order: np.ndarray) -> None:
        """Reorder the records in place: row k becomes the former row ``order[k]`` (a permutation); the
        columns are rebuilt one at a time (no objects, one column's copy at a time)."""
        order = np.asarray(order, np.int64)
        if len(order) != len(self):
            raise ValueError("permute: the order must list every row once")
        counts = self.input_counts()[order]
        starts = self.column("input_end")[order] - counts
        ids = self.column("id")[order]
        self.id = array("q", ids.tobytes())
        del ids
        for name in ("chip", *_INS_CYCLES, *(f"{f}_code" for f in _INS_CODED)):
            col = getattr(self, name)
            a = np.frombuffer(col, np.int64 if col.typecode == "q" else np.int32)[order]
            setattr(self, name, array(col.typecode, a.tobytes()))
        self.output = _take(self.output, order)
        end = np.cumsum(counts)
        flat_ix = np.repeat(starts - (end - counts), counts) + np.arange(int(end[-1]) if len(end) else 0)
        self.input_flat = _take(self.input_flat, flat_ix)
        self.input_end = array("q", end.astype(np.int64).tobytes())
        self._set_cols()

    def to_dicts(self) -> list[dict[str, Any]]:
        """Each instruction as `dataclasses.asdict` gives it."""
        return [asdict(i) for i in self]


@dataclass(frozen=True, slots=True)
class Stage:
    """A pipeline stage of one replica: layers ``layers[0]..layers[1]-1`` on ``chips``.

    Layer -1 is the embedding, layer L (= num_layers) the final norm + logits + sample.
    """

    index: int
    replica: int
    layers: Range
    chips: tuple[int, ...]
    head: bool = False  # holds the final norm / logits / sampling
    embed: bool = False  # holds the embedding gather


@dataclass(frozen=True, slots=True)
class LayoutInfo:
    """The chosen layout (partition) in plain data."""

    tp: int  # chips per stage (tensor-parallel degree)
    stages: int  # pipeline stages per replica
    replicas: int  # data-parallel replicas
    kv_seq_split: int  # chips a full-attention layer's KV of one stream is split over (sequence)
    micro_batches: int  # micro-batches in flight
    kv_spread: int = 0  # helper chips in other stages holding further KV chunks of full-attention layers
    kv_block: int = 1  # tokens per KV block striped round-robin over a split layer's holders (``kv_stripe``)
    stage_list: tuple[Stage, ...] = ()
    notes: tuple[str, ...] = ()


def stripe_count(x: int | np.ndarray, index: int, count: int, block: int = 1) -> int | np.ndarray:
    """Positions ``p`` in ``[0, x)`` with ``(p // block) % count == index`` (elementwise for arrays)."""
    period = block * count
    if isinstance(x, (int, np.integer)):  # the scalar path, without numpy's per-call overhead
        full, rem = divmod(max(int(x), 0), period)
        return full * block + min(max(rem - index * block, 0), block)
    x = np.maximum(x, 0)
    full, rem = np.divmod(x, period)
    out = full * block + np.clip(rem - index * block, 0, block)
    return int(out) if np.ndim(out) == 0 else out


def stripe_positions(lo: int, hi: int, index: int = 0, count: int = 1, block: int = 1) -> np.ndarray:
    """The positions in ``[lo, hi)`` that stripe ``(index, count)`` of ``block``-token blocks holds."""
    p = np.arange(max(lo, 0), max(hi, lo, 0), dtype=np.int64)
    return p if count == 1 else p[(p // block) % count == index]


@dataclass
class Program:
    """Per-chip instruction streams and the transfer list, on one global clock."""

    system: str
    model: str
    phase: Mapping[str, Any]  # {"kind", "contexts", "new_tokens"}
    weights: str
    kv: str
    kv_layout: str
    clock_hz: float
    chip_sram_bytes: int
    layout: LayoutInfo
    regions: RegionTable  # a list of `Region` values given here is made a table
    buffers: BufferTable  # a dict of `Buffer` values given here is made a table
    instructions: InstructionTable  # sorted by (chip, cycle_start, id); a list of `Instruction` values is made a table
    transfers: TransferTable  # a list of `Transfer` values given here is made a table
    links: dict[int, Link]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.transfers, TransferTable):  # every other method relies on the table
            self.transfers = TransferTable(self.transfers)
        if not isinstance(self.buffers, BufferTable):
            self.buffers = BufferTable(self.buffers)
        if not isinstance(self.regions, RegionTable):
            self.regions = RegionTable(self.regions)
        if not isinstance(self.instructions, InstructionTable):  # as for the transfers
            self.instructions = InstructionTable(self.instructions)

    # --- views ------------------------------------------------------------------------
    @property
    def chips(self) -> list[int]:
        return sorted(set(self.regions.chip) | set(np.unique(self.instructions.column("chip")).tolist()))

    def by_chip(self) -> dict[int, list[Instruction]]:
        out: dict[int, list[Instruction]] = {}
        for ins in self.instructions:
            out.setdefault(ins.chip, []).append(ins)
        return out

    @property
    def makespan_cycles(self) -> int:
        ends = [int(self.instructions.column("cycle_end").max())] if len(self.instructions) else []
        if len(self.transfers):
            ends.append(int(self.transfers.column("end_cycle").max()))
        return max(ends) if ends else 0

    # --- serialisation ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        shallow = copy.copy(self)
        shallow.transfers = []  # asdict would deep-copy the tables: their records are written below
        shallow.buffers = {}
        shallow.regions = []
        shallow.instructions = []
        d = asdict(shallow)
        d["regions"] = self.regions.to_dicts()
        d["instructions"] = self.instructions.to_dicts()
        d["transfers"] = self.transfers.to_dicts()
        d["links"] = [asdict(v) for v in self.links.values()]
        d["buffers"] = [asdict(v) for v in self.buffers.values()]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Program:
        def rng(x: Any) -> Range | None:
            return None if x is None else (int(x[0]), int(x[1]))

        lay = dict(d["layout"])
        lay["stage_list"] = tuple(
            Stage(**{**s, "layers": rng(s["layers"]), "chips": tuple(s["chips"])}) for s in lay["stage_list"]
        )
        lay["notes"] = tuple(lay.get("notes", ()))
        bufs = {}
        for b in d["buffers"]:
            bufs[b["id"]] = Buffer(**{**b, "cols": rng(b["cols"]), "heads": rng(b["heads"]),
                                      "lse_shape": tuple(b["lse_shape"])})
        ins = InstructionTable(
            Instruction(**{**i, "inputs": tuple(i["inputs"]),
                           "slice": {k: rng(v) for k, v in i["slice"].items()}})
            for i in d["instructions"]
        )
        trs = TransferTable(Transfer(**{**t, "links": tuple((int(a), int(b)) for a, b in t["links"])})
                            for t in d["transfers"])
        return cls(
            system=d["system"], model=d["model"], phase=d["phase"], weights=d["weights"], kv=d["kv"],
            kv_layout=d["kv_layout"], clock_hz=d["clock_hz"], chip_sram_bytes=d["chip_sram_bytes"],
            layout=LayoutInfo(**lay), regions=RegionTable(Region(**r) for r in d["regions"]), buffers=bufs,
            instructions=ins, transfers=trs, links={int(x["id"]): Link(**x) for x in d["links"]},
            meta=dict(d.get("meta", {})),
        )

    @classmethod
    def from_json(cls, text: str) -> Program:
        return cls.from_dict(json.loads(text))
