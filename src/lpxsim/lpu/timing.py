"""Timing of a compiled Program: latency, initiation interval, tok/s, utilisation."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field

from lpxsim.graph import OpGraph
from lpxsim.lpu.arch import FITTED_MECHANISM, Arch
from lpxsim.lpu.program import Program


@dataclass(frozen=True)
class Timing:
    """One compiled step. `latency_s`: the micro-batch's tokens through the whole model and back to
    the embedding; `interval_s`: the busiest stage's span, i.e. how soon the next micro-batch may enter."""

    latency_s: float
    interval_s: float
    batch: int  # sequences in the micro-batch
    new_tokens: int
    tok_s_user: float  # one micro-batch in flight: 1 / latency per sequence (decode)
    sram_bw_util: float
    mxm_util: float
    link_util: float
    stage_spans_s: tuple[float, ...]
    chips: int
    breakdown_us: dict[str, float] = field(default_factory=dict)  # µs per mechanism, critical path; sums to latency
    fitted_share: float = 0.0  # share of the latency that the fitted residual carries

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(p: Program, graph: OpGraph, arch: Arch) -> Timing:
    """Latency and interval from the schedule; utilisation over the makespan of all used chips."""
    span = max(1, p.makespan_cycles)
    chip_stage = {}
    for st in p.layout.stage_list:
        if st.replica == 0:
            for c in st.chips:
                chip_stage[c] = st.index
    busy: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for ins in p.instructions:
        busy[chip_stage.get(ins.chip, 0)].append((ins.cycle_start, ins.cycle_end))
    for t in p.transfers:
        busy[chip_stage.get(t.src_chip, 0)].append((t.send_cycle, t.end_cycle))
    spans = tuple(arch.seconds(_union(busy[s])) for s in sorted(busy))
    latency = arch.seconds(span)
    interval = max(spans) if spans else latency
    n_chips = len({c for c in chip_stage}) or 1
    bytes_read = graph.total("weight_bytes") + graph.total("kv_read_bytes")
    sram = bytes_read / (n_chips * arch.mem_bytes_per_cycle * span)
    peak = max(arch.mxm_flops_per_cycle.values())
    mxm = graph.total("flops") / (n_chips * peak * span)
    link_busy = sum(t.ser_cycles * len(t.links) for t in p.transfers)
    link_util = link_busy / (max(1, 2 * len(p.links)) * span)
    bd = {k: arch.seconds(v) * 1e6 for k, v in p.meta.get("breakdown_cycles", {}).items()}
    B = graph.phase.sequences
    new = graph.phase.new_tokens if graph.phase.kind == "decode" else 1
    return Timing(
        latency_s=latency, interval_s=interval, batch=B, new_tokens=graph.phase.new_tokens,
        tok_s_user=new / latency,
        sram_bw_util=sram, mxm_util=mxm, link_util=link_util, stage_spans_s=spans,
        chips=p.layout.tp * p.layout.stages * p.layout.replicas,
        breakdown_us=bd, fitted_share=bd.get(FITTED_MECHANISM, 0.0) * 1e-6 / latency if latency > 0 else 0.0,
    )


def _union(intervals: list[tuple[int, int]]) -> int:
    """Total cycles covered by the union of half-open intervals (a stage's busy time per micro-batch)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total
