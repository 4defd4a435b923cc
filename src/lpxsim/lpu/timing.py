"""Timing of a compiled Program: latency, initiation interval, tok/s, utilisation."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

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
    chip_stage = {}
    for st in p.layout.stage_list:
        if st.replica == 0:
            for c in st.chips:
                chip_stage[c] = st.index
    ins, trs = p.instructions, p.transfers
    m = len(trs)
    # per record: (stage of its chip, start, end); a transfer counts on its source chip's stage
    a = np.stack([ins.column("chip"), ins.column("cycle_start"), ins.column("cycle_end")], axis=1)
    b = np.stack([trs.column("src_chip"), trs.column("send_cycle"), trs.column("end_cycle")], axis=1)
    chip, start, end = np.concatenate([a, b]).T
    span = max(1, int(end.max(initial=0)))  # `Program.makespan_cycles`, on the columns read here
    lut = np.zeros(int(chip.max(initial=0)) + 1, np.int64)  # chips of no replica-0 stage count as stage 0
    for c, si in chip_stage.items():
        if c < len(lut):
            lut[c] = si
    stage = lut[chip] if len(chip) else chip
    spans = tuple(arch.seconds(_union(start[stage == s], end[stage == s])) for s in np.unique(stage).tolist())
    latency = arch.seconds(span)
    interval = max(spans) if spans else latency
    n_chips = len({c for c in chip_stage}) or 1
    bytes_read = graph.total("weight_bytes") + graph.total("kv_read_bytes")
    sram = bytes_read / (n_chips * arch.mem_bytes_per_cycle * span)
    peak = max(arch.mxm_flops_per_cycle.values())
    mxm = graph.total("flops") / (n_chips * peak * span)
    route_hops = np.fromiter(map(len, trs.routes), np.int64, len(trs.routes))
    link_busy = int(trs.column("ser_cycles") @ route_hops[trs.column("route")]) if m else 0
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


def _union(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total cycles covered by the union of half-open intervals [starts, ends) (a stage's busy time per
    micro-batch): in start order, a new run begins where a start lies beyond every earlier end."""
    if not len(starts):
        return 0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)  # furthest end so far
    new = np.empty(len(s), bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(s) - 1]
    return int((reach[last] - s[first]).sum())
