"""An AFD split, emulated: the attention half runs in the Hugging Face model (the GPU side), each
layer's FFN half (MoE experts included) runs as a compiled FFN-only LPX Program on the numpy
emulator, and the final logits must equal the plain Hugging Face forward pass.

Per layer the hidden state leaving attention (the residual stream x) crosses to the LPX side; the
FFN-only Program computes x + FFN(norm(x)) and that crosses back, which is what the attention side
continues with. The per-layer Programs are compiled, placed and verified by the same compiler as
a whole model (`lower(..., part="ffn", layers=(L,))`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lpxsim.graph import Phase, lower
from lpxsim.lpu.arch import arch_for
from lpxsim.lpu.compiler import build_program, resolve_system
from lpxsim.lpu.emulate import instr as I
from lpxsim.lpu.emulate.executor import ProgramExecutor, last_uses
from lpxsim.lpu.emulate.interpret import positions
from lpxsim.lpu.emulate.reference import Reference
from lpxsim.lpu.emulate.state import EmulationError, Value
from lpxsim.lpu.layout import Layout, parse_layout
from lpxsim.lpu.program import Program
from lpxsim.lpu.verify import verify

PRECISION = "bf16"


def compile_ffn_layer(ref: Reference, layer: int, tokens: int, chips: int, layout: str, sram_bytes: int
                      ) -> Program:
    """Compile and verify the FFN-only Program of one layer for `tokens` rows on `chips` emulated chips."""
    s, n, units = resolve_system("lpx", None, chips)
    arch = arch_for(s).with_sram(sram_bytes)
    lay = Layout(**{"replicas": 1, "kv_seq_split": 1, **parse_layout(layout)})
    graph = lower(ref.spec, Phase.prefill(tokens), weights=PRECISION, kv=PRECISION, part="ffn", layers=(layer,))
    prog, _ = build_program(graph, s, units, arch, lay, n)
    rep = verify(prog)
    if not rep.ok:
        raise RuntimeError(f"the compiler's verifier rejected the FFN-only program: {rep}")
    return prog


class FfnExecutor(ProgramExecutor):
    """Runs FFN-only Programs: the hidden state is the step's input, the layer's residual its output."""

    def run_hidden(self, program: Program, hidden: np.ndarray, layer: int) -> np.ndarray:
        ph = program.phase
        phase = Phase(ph["kind"], tuple(int(c) for c in ph["contexts"]), int(ph["new_tokens"]))
        graph = lower(self.model, phase, weights=program.weights, kv=program.kv, kv_layout=program.kv_layout,
                      part="ffn", layers=(layer,))
        ids = np.zeros(phase.tokens, dtype=np.int64)
        self._ctx = I.StepContext(graph, self.weights, ids, positions(phase.contexts, phase.new_tokens))
        self._program = program
        self._ops = {op.name for op in graph}
        self._incoming = {t.dst_buffer: t for t in program.transfers}
        self._regions = {(r.chip, r.name): r for r in program.regions}
        self._live: dict[tuple[int, Any], list] = {}
        self._last_use = last_uses(program)
        for st in self.chips.values():
            st.buffers.clear()
        data = np.asarray(hidden, dtype=np.float32)
        for buf in program.buffers.values():  # the hidden state arriving from the attention side
            if buf.op == "tokens" and buf.id not in self._incoming:
                self._chip(buf.chip).buffers[buf.id] = Value(data, 0, 0)
        events = sorted([(t.arrive_cycle, 0, t.id, t) for t in program.transfers]
                        + [(i.cycle_start, 1, i.id, i) for i in program.instructions], key=lambda e: e[:3])
        for _, kind, _, ev in events:
            self._land(ev) if kind == 0 else self._execute(ev)
        final = graph.ops[-1].name
        for st in self.chips.values():
            for bid, val in st.buffers.items():
                buf = program.buffers[bid]
                if buf.op == final and buf.partial is None and buf.cols is None:
                    return np.asarray(val.data, dtype=np.float32)
        raise EmulationError(final, -1, program.makespan_cycles, "no chip holds the layer's whole output")


def _ffn_module(layer: Any) -> Any:
    for name in ("mlp", "block_sparse_moe", "feed_forward"):
        if hasattr(layer, name):
            return getattr(layer, name)
    raise RuntimeError(f"no FFN module on {type(layer).__name__}")


def afd_logits(ref: Reference, prompt: list[int], chips: int, layout: str, sram_bytes: int,
               layer_map: dict[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(AFD-split logits, plain HF logits) of the prompt's last position. `layer_map` (a negative
    control) runs layer L's FFN with the Program of layer layer_map[L]."""
    import torch

    model = ref.model
    decoder = model.model.layers
    ex = FfnExecutor(ref.spec, ref.weights)
    progs = {L: compile_ffn_layer(ref, L, len(prompt), chips, layout, sram_bytes) for L in range(len(decoder))}
    ids = torch.tensor([prompt], dtype=torch.long)
    with torch.no_grad():
        plain = model(input_ids=ids).logits[0, -1].float().numpy().copy()
    handles, seen = [], {}
    for L, layer in enumerate(decoder):
        src = (layer_map or {}).get(L, L)

        def capture(_mod, args, L=L):
            seen[L] = args[0][0].float().numpy().copy()  # the residual stream x entering the FFN block

        def replace(_mod, _args, out, L=L, src=src):
            y = ex.run_hidden(progs[src], seen[L], src)
            delta = torch.from_numpy(y - seen[L]).unsqueeze(0)  # the layer adds x back itself
            return (delta, *out[1:]) if isinstance(out, tuple) else delta

        handles.append(layer.post_attention_layernorm.register_forward_pre_hook(capture))
        handles.append(_ffn_module(layer).register_forward_hook(replace))
    try:
        with torch.no_grad():
            split = model(input_ids=ids).logits[0, -1].float().numpy().copy()
    finally:
        for h in handles:
            h.remove()
    return split, plain
