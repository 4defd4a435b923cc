"""Run a compiled Program on numpy, chip by chip, in global cycle order.

Events are instruction starts (at `cycle_start`) and transfer arrivals (at
`arrive_cycle`); at one cycle, arrivals land first because a consumer may start
on the cycle its first vector arrives. An instruction reads only buffers in its
own chip's SRAM that are readable at its start cycle; a transfer copies the
source buffer, which must have been ready at its send cycle, into the
destination chip at its arrival cycle. Every breach raises an EmulationError
naming the op, the chip and the cycle. KV caches persist across steps, so a
decode Program that reads KV its own chips never wrote fails too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lpxsim.graph import Phase, lower
from lpxsim.lpu.emulate import instr as I
from lpxsim.lpu.emulate.interpret import check_supported, positions
from lpxsim.lpu.emulate.state import ChipState, EmulationError, Value
from lpxsim.lpu.program import Buffer, Instruction, Program, Transfer
from lpxsim.specs.model import ModelSpec

F32 = np.float32

_PLAIN: dict[str, Callable[..., Any]] = {
    "matmul": I.run_matmul, "norm": I.run_norm, "rope": I.run_rope, "elementwise": I.run_elementwise,
    "residual": I.run_residual, "router": I.run_router, "experts": I.run_experts, "embed": I.run_embed,
    "sample": I.run_sample,
}
_WITH_KV: dict[str, Callable[..., Any]] = {"kv_write": I.run_kv_write, "attention": I.run_attention}


@dataclass
class StepResult:
    """One executed step: logits [rows, vocab] read back from the chips, and the greedy tokens."""

    logits: np.ndarray
    tokens: np.ndarray
    instructions: int
    transfers: int
    makespan_cycles: int


def last_uses(program: Program) -> dict[str, int]:
    """Per buffer, the last cycle it is read: its consumers' last cycles and its transfers' end cycles."""
    last: dict[str, int] = {}
    for ins in program.instructions:
        for b in ins.inputs:
            last[b] = max(last.get(b, 0), ins.cycle_end)
    for t in program.transfers:
        last[t.src_buffer] = max(last.get(t.src_buffer, 0), t.end_cycle)
    return last


class ProgramExecutor:
    """Executes the Programs of successive steps of one model; chips keep their KV between steps."""

    def __init__(self, model: ModelSpec, weights: Mapping[str, np.ndarray]) -> None:
        check_supported(model)
        self.model = model
        self.weights = weights
        self.chips: dict[int, ChipState] = {}

    def _chip(self, chip: int) -> ChipState:
        if chip not in self.chips:
            self.chips[chip] = ChipState(chip)
        return self.chips[chip]

    def run(self, program: Program, token_ids: np.ndarray | list[int]) -> StepResult:
        """Execute one step's Program on `token_ids` (the step's new tokens, sequence-major)."""
        ph = program.phase
        phase = Phase(ph["kind"], tuple(int(c) for c in ph["contexts"]), int(ph["new_tokens"]))
        graph = lower(self.model, phase, weights=program.weights, kv=program.kv, kv_layout=program.kv_layout)
        ids = np.asarray(token_ids, dtype=np.int64)
        if ids.shape != (phase.tokens,):
            raise ValueError(f"the step takes {phase.tokens} token ids, got {ids.shape}")
        ctx = I.StepContext(graph, self.weights, ids, positions(phase.contexts, phase.new_tokens))
        self._program, self._ctx = program, ctx
        self._ops = {op.name for op in graph}
        self._incoming = {t.dst_buffer: t for t in program.transfers}
        self._regions = {(r.chip, r.name): r for r in program.regions}
        self._live: dict[tuple[int, str], list[tuple[Buffer, int]]] = {}
        self._last_use = last_uses(program)
        for st in self.chips.values():
            st.buffers.clear()
        for buf in program.buffers.values():  # step inputs: the token ids, present from cycle 0
            if buf.op == "tokens":
                self._chip(buf.chip).buffers[buf.id] = Value(ids, 0, 0)
        events: list[tuple[int, int, int, Instruction | Transfer]] = [
            (t.arrive_cycle, 0, t.id, t) for t in program.transfers
        ] + [(i.cycle_start, 1, i.id, i) for i in program.instructions]
        events.sort(key=lambda e: e[:3])
        for _, _, _, ev in events:
            if isinstance(ev, Transfer):
                self._land(ev)
            else:
                self._execute(ev)
        logits, tokens = self._read_out(graph)
        return StepResult(logits, tokens, len(program.instructions), len(program.transfers), program.makespan_cycles)

    # --- transfers --------------------------------------------------------------------
    def _land(self, t: Transfer) -> None:
        bufs = self._program.buffers
        src, dst = bufs.get(t.src_buffer), bufs.get(t.dst_buffer)
        if src is None or dst is None:
            raise EmulationError("?", t.dst_chip, t.arrive_cycle, f"transfer {t.id} names an undeclared buffer")
        val = self._chip(t.src_chip).buffers.get(t.src_buffer)
        if val is None:
            raise EmulationError(src.op, t.src_chip, t.send_cycle,
                                 f"transfer {t.id} sends buffer {t.src_buffer!r} that was never produced on the chip")
        if val.avail > t.send_cycle:
            raise EmulationError(src.op, t.src_chip, t.send_cycle, f"transfer {t.id} sends {t.src_buffer!r} "
                                 f"before it is ready (first vector at cycle {val.avail})")
        if (src.op, src.partial) != (dst.op, dst.partial) or dst.chip != t.dst_chip:
            raise EmulationError(src.op, t.dst_chip, t.arrive_cycle,
                                 f"transfer {t.id} lands {t.src_buffer!r} as a different buffer {t.dst_buffer!r}")
        if t.bytes < dst.bytes:
            raise EmulationError(src.op, t.dst_chip, t.arrive_cycle, f"transfer {t.id} carries {t.bytes} bytes into "
                                 f"{t.dst_buffer!r} of {dst.bytes} bytes")
        data = self._columns(t, src, dst, val.data)
        if src.partial == "lse" and dst.bytes < src.bytes:  # softmax statistics only: (no output, lse)
            data = (None, data[1])
        st = self._chip(t.dst_chip)
        if t.dst_buffer in st.buffers:
            raise EmulationError(dst.op, t.dst_chip, t.arrive_cycle, f"buffer {t.dst_buffer!r} written twice")
        self._check_region(dst, t.arrive_cycle)
        st.buffers[t.dst_buffer] = Value(data, t.arrive_cycle, t.end_cycle, dict(val.meta))

    def _columns(self, t: Transfer, src: Buffer, dst: Buffer, data: Any) -> Any:
        """A transfer carries the destination buffer's columns of the source (all of them, or a sub-range)."""
        if src.cols == dst.cols or not isinstance(data, np.ndarray) or src.op not in self._ops:
            return data
        width = I.op_width(self._ctx.graph, src.op)
        (a, b), (lo, hi) = I._span(src.cols, width), I._span(dst.cols, width)
        if lo < a or hi > b or data.ndim != 2 or data.shape[1] != b - a:
            raise EmulationError(src.op, t.dst_chip, t.arrive_cycle, f"transfer {t.id} lands columns {lo}:{hi} "
                                 f"from {t.src_buffer!r} which holds {a}:{b}")
        return data[:, lo - a : hi - a]

    def _check_region(self, buf: Buffer, cycle: int) -> None:
        """The buffer's bytes lie in a region of its chip and overwrite no buffer that is still to be read."""
        if not buf.region:
            return
        region = self._regions.get((buf.chip, buf.region))
        if region is None:
            raise EmulationError(buf.op, buf.chip, cycle, f"buffer {buf.id!r} is in region {buf.region!r} "
                                 "which the chip does not have")
        lo, hi = buf.offset_bytes, buf.offset_bytes + max(buf.bytes, 1)
        if lo < 0 or hi > region.size_bytes:
            raise EmulationError(buf.op, buf.chip, cycle, f"buffer {buf.id!r} bytes {lo}:{hi} overflow region "
                                 f"{region.name!r} of {region.size_bytes} bytes")
        live = self._live.setdefault((buf.chip, buf.region), [])
        for other, since in live:
            o_lo, o_hi = other.offset_bytes, other.offset_bytes + max(other.bytes, 1)
            if o_lo < hi and lo < o_hi and since <= cycle <= self._last_use.get(other.id, since):
                raise EmulationError(buf.op, buf.chip, cycle, f"writes {buf.id!r} over {other.id!r} (region "
                                     f"{region.name!r} bytes {max(lo, o_lo)}:{min(hi, o_hi)}), which is read until "
                                     f"cycle {self._last_use[other.id]}")
        live.append((buf, cycle))

    # --- instructions -----------------------------------------------------------------
    def _inputs(self, ins: Instruction) -> list[I.Arg]:
        st, args = self._chip(ins.chip), []
        for bid in ins.inputs:
            buf = self._program.buffers.get(bid)
            if buf is None or buf.chip != ins.chip:
                where = "undeclared" if buf is None else f"on chip {buf.chip}"
                raise EmulationError(ins.op, ins.chip, ins.cycle_start, f"reads buffer {bid!r} which is {where}")
            val = st.buffers.get(bid)
            if val is None:
                t = self._incoming.get(bid)
                when = f"arrives at cycle {t.arrive_cycle} (transfer {t.id})" if t else "has arrived"
                raise EmulationError(ins.op, ins.chip, ins.cycle_start,
                                     f"reads buffer {bid!r} ({buf.op}) before its data {when}")
            if val.avail > ins.cycle_start:
                raise EmulationError(ins.op, ins.chip, ins.cycle_start,
                                     f"reads buffer {bid!r} ({buf.op}) before its data arrives at cycle {val.avail}")
            if val.end > ins.cycle_end:
                raise EmulationError(ins.op, ins.chip, ins.cycle_start, f"ends at cycle {ins.cycle_end} before "
                                     f"the last vector of {bid!r} is in place at cycle {val.end}")
            args.append((buf, val))
        return args

    def _execute(self, ins: Instruction) -> None:
        args = self._inputs(ins)
        out = self._program.buffers.get(ins.output)
        if out is None or out.chip != ins.chip:
            raise EmulationError(ins.op, ins.chip, ins.cycle_start, f"writes buffer {ins.output!r} not on this chip")
        st = self._chip(ins.chip)
        if ins.output in st.buffers:
            raise EmulationError(ins.op, ins.chip, ins.cycle_start, f"buffer {ins.output!r} written twice")
        self._check_region(out, ins.first_out_cycle)
        if ins.kind == "kv_read":  # the chip's own KV store, read into a buffer
            data, meta, partial = I.run_kv_read(ins, args, self._ctx, st)
        elif ins.kind in I.COLLECTIVES:
            data, meta, partial = I.COLLECTIVES[ins.kind](ins, args, self._ctx, out)
        else:
            data, meta, partial = self._graph_op(ins, args, st)
        cols = meta.pop("cols", None)
        width = I.op_width(self._ctx.graph, ins.op) if cols is not None else 0
        if cols is not None and tuple(cols) != I._span(out.cols, width):
            raise EmulationError(ins.op, ins.chip, ins.cycle_start, f"produces columns {cols} but its output "
                                 f"{out.id!r} is declared {out.cols}")
        if partial != out.partial:
            raise EmulationError(ins.op, ins.chip, ins.cycle_start, f"computes a {partial!r} partial but its "
                                 f"output {out.id!r} is declared {out.partial!r}")
        st.buffers[ins.output] = Value(data, ins.first_out_cycle, ins.cycle_end, meta)

    def _graph_op(self, ins: Instruction, args: list[I.Arg], st: ChipState) -> tuple[Any, dict, Any]:
        try:
            op = self._ctx.graph.op(ins.op)
        except KeyError:
            raise EmulationError(ins.op, ins.chip, ins.cycle_start, "names no op of the step's graph") from None
        if ins.kind != op.kind:
            raise EmulationError(ins.op, ins.chip, ins.cycle_start, f"kind {ins.kind!r} but the op is {op.kind!r}")
        if op.kind in _WITH_KV:
            data, meta = _WITH_KV[op.kind](ins, op, args, self._ctx, st)
        else:
            data, meta = _PLAIN[op.kind](ins, op, args, self._ctx)
        return data, meta, meta.pop("partial", None)

    # --- read-back --------------------------------------------------------------------
    def _read_out(self, graph: Any) -> tuple[np.ndarray, np.ndarray]:
        """Assemble the full logits from the chips' final logits buffers; tokens from the final sample."""
        op = graph.op("logits")
        V = op.shape[2]
        logits: np.ndarray | None = None
        covered = np.zeros(V, bool)
        tokens = None
        for st in self.chips.values():
            for bid, val in st.buffers.items():
                buf = self._program.buffers[bid]
                if buf.partial is not None:
                    continue
                if buf.op == "logits":
                    a, b = buf.cols or (0, V)
                    if logits is None:
                        logits = np.zeros((val.data.shape[0], V), F32)
                    logits[:, a:b] = val.data
                    covered[a:b] = True
                elif buf.op == "sample":
                    tokens = val.data
        if logits is None or not covered.all():
            missing = int((~covered).sum())
            raise EmulationError("logits", -1, self._program.makespan_cycles,
                                 f"{missing} vocabulary columns were never computed in full on any chip")
        if tokens is None:
            raise EmulationError("sample", -1, self._program.makespan_cycles, "no chip holds the sampled tokens")
        return logits, np.asarray(tokens, dtype=np.int64)

