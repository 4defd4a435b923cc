"""Compile a tiny model onto N emulated chips, run prefill + greedy decode, and compare with Hugging Face.

Every step gets its own compiled Program (the step's phase: prefill of the
prompt, then one decode step per generated token), all on the one layout of
the run (`run_layout`), each verified against the KV the steps before it left;
the executor keeps each chip's KV cache between steps. The reference is the
real HF model class with the same seeded weights (`reference.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lpxsim.core.errors import DoesNotFit, UserError
from lpxsim.core.inputs import EMULATE_STEPS_MAX
from lpxsim.graph import Phase, lower
from lpxsim.lpu.emulate.executor import ProgramExecutor
from lpxsim.lpu.emulate.reference import Reference, build_reference, hf_greedy, seeded_prompt
from lpxsim.lpu.layout import Layout
from lpxsim.lpu.program import Program
from lpxsim.lpu.verify_kv import KvResidency, kv_after
from lpxsim.specs.accounting import weight_bytes
from lpxsim.specs.model import ModelSpec

# float32 on both sides; see docs/assumptions.md ("Emulator") for why 1e-4 absolute on logits.
LOGIT_ATOL = 1e-4
PRECISION = "bf16"  # the precision the Program's bytes are sized at; the emulator computes in float32
SIZING_STEPS = 40  # 1.25x steps tried by `sram_for` (x7,500 over its start)


@dataclass
class EmulationReport:
    """The emulated run next to the reference: tokens, logit error per step, and the Programs' size."""

    model: str
    model_type: str
    chips: int
    layout: str
    sram_bytes_per_chip: int
    seed: int
    prompt_tokens: int
    steps: int
    tokens_match: bool
    max_abs_logit_err: float
    tolerance: float
    within_tolerance: bool
    reference_tokens: list[int]
    emulated_tokens: list[int]
    step_errors: list[float]
    instructions: int = 0
    transfers: int = 0
    makespan_cycles: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def largest_tensor_bytes(spec: ModelSpec, prompt_tokens: int = 8) -> int:
    """Bytes of the model's largest single tensor at `PRECISION`: a weight matrix (the embedding table
    whole) or an activation of a `prompt_tokens` prefill."""
    g = lower(spec, Phase.prefill(max(1, prompt_tokens)), weights=PRECISION, kv=PRECISION)
    biggest = 0.0
    for op in g.ops:
        w = op.weight_bytes
        if op.kind == "embed":
            w = op.weight_bytes / max(op.tokens, 1) * spec.vocab_size  # the whole table, not the rows gathered
        elif op.kind == "experts":
            w = op.attrs["expert_bytes"]
        biggest = max(biggest, w, op.act_out_bytes)
    return int(math.ceil(biggest))


def run_phases(prompt_tokens: int, steps: int) -> tuple[Phase, Phase]:
    """The run's largest steps: the prefill of the prompt and the last decode step."""
    return Phase.prefill(prompt_tokens), Phase.decode([max(prompt_tokens + steps - 1, 0)])


def run_layout(spec: ModelSpec, chips: int, layout: str | Layout | None, sram: int, prompt_tokens: int,
               steps: int) -> Layout:
    """The one layout every step of the run compiles on (`deployment_layout`: the prefill and the last decode
    step both place on it); raises DoesNotFit when no candidate holds both."""
    from lpxsim.lpu import deployment_layout

    return deployment_layout(spec, "lpx", phases=run_phases(prompt_tokens, steps), chips=chips,
                             context=prompt_tokens + steps, weights=PRECISION, kv=PRECISION, layout=layout,
                             chip_sram_bytes=sram)


def _fits(spec: ModelSpec, chips: int, layout: str | None, sram: int, prompt_tokens: int, steps: int) -> bool:
    """Does one layout place the run's prefill and its last decode step on `chips` chips of `sram` bytes each?"""
    try:
        run_layout(spec, chips, layout, sram, prompt_tokens, steps)
    except DoesNotFit as e:
        if e.field == "chips":  # the layout needs more chips than the run has: no SRAM size fixes that
            raise
        return False
    return True


def sram_for(spec: ModelSpec, chips: int, layout: str | None = None, prompt_tokens: int = 8, steps: int = 6) -> int:
    """Default per-chip SRAM: twice the bf16 weights spread over `chips` (so the chips are needed), at least the
    largest tensor, raised by 1/4 at a time until the run's prefill and decode steps both place on one layout.

    On many chips a tiny model's per-chip floor (replicated norms and activations, stage hand-off
    buffers) exceeds its share of the weights; the search finds the smallest size on that 1.25x ladder."""
    base = max(int(math.ceil(2.0 * weight_bytes(spec, PRECISION) / chips)), largest_tensor_bytes(spec, prompt_tokens))
    sram = base
    for _ in range(SIZING_STEPS):
        if _fits(spec, chips, layout, sram, prompt_tokens, steps):
            return sram
        sram = int(math.ceil(sram * 1.25))
    raise DoesNotFit("sram_bytes", f"{spec.name} on {chips} chips ({layout or 'searched layout'}) does not place with "
                                   f"up to {sram:,} B SRAM per chip (started from {base:,} B)")


def default_sram_bytes(ref: Reference, chips: int, layout: str | None = None, prompt_tokens: int = 8,
                       steps: int = 6) -> int:
    """`sram_for` of the reference's model."""
    return sram_for(ref.spec, chips, layout, prompt_tokens, steps)


def compile_step(ref: Reference, phase: Phase, chips: int, layout: str | Layout | None, sram_bytes: int,
                 context: int, kv_held: KvResidency | None = None) -> Program:
    """Compile one step of the reference's model for the emulated chips, verified by the compiler (against
    `kv_held`, the KV the chips hold from the run's earlier steps, when given)."""
    from lpxsim.lpu import compile_program

    res = compile_program(ref.spec, "lpx", chips=chips, phase=phase, weights=PRECISION, kv=PRECISION,
                          layout=layout, chip_sram_bytes=sram_bytes, context=context, kv_held=kv_held)
    if not res.report.ok:
        raise RuntimeError(f"the compiler's own verifier rejected the program: {res.report}")
    return res.program


def validate_request(chips: int, steps: int, prompt_tokens: int, max_context: int | None = None) -> None:
    """A UserError naming the field when the run cannot be asked for: no chips, a step count out of range, no
    prompt, or a prompt and its steps past the model's `max_context` (the prompt named when it alone is)."""
    if chips < 1:
        raise UserError("chips", f"expected at least 1 chip, got {chips}")
    if not 0 <= steps <= EMULATE_STEPS_MAX:
        raise UserError("steps", f"expected 0..{EMULATE_STEPS_MAX} decode steps, got {steps}")
    if prompt_tokens < 1:
        raise UserError("prompt_tokens", f"expected at least 1 prompt token, got {prompt_tokens}")
    if max_context is not None and prompt_tokens + steps > max_context:
        raise UserError("prompt_tokens" if prompt_tokens > max_context else "steps",
                        f"prompt + steps = {prompt_tokens + steps} exceeds the model's max_position_embeddings "
                        f"{max_context}")


def _validate(ref: Reference, chips: int, steps: int, prompt_tokens: int) -> None:
    validate_request(chips, steps, prompt_tokens, ref.spec.max_context)


def emulate_reference(
    ref: Reference,
    chips: int,
    steps: int = 6,
    seed: int = 0,
    layout: str | None = None,
    prompt_tokens: int = 8,
    sram_bytes: int | None = None,
    tolerance: float = LOGIT_ATOL,
    mutate: Callable[[Program, int], Program] | None = None,
) -> EmulationReport:
    """Run the compiled Programs and the HF model on the same seeded prompt; `mutate` may corrupt step i's Program."""
    _validate(ref, chips, steps, prompt_tokens)
    sram = sram_bytes or default_sram_bytes(ref, chips, layout, prompt_tokens, steps)
    prompt = seeded_prompt(ref.spec.vocab_size, prompt_tokens, seed)
    hf = hf_greedy(ref, prompt, steps)
    ex = ProgramExecutor(ref.spec, ref.weights)
    context = prompt_tokens + steps
    tokens: list[int] = []
    errors: list[float] = []
    n_ins = n_tr = 0
    spans: list[int] = []
    lay = run_layout(ref.spec, chips, layout, sram, prompt_tokens, steps)  # every step on the same chips' KV
    held = KvResidency()  # nothing before the prefill
    for i in range(steps + 1):
        phase = Phase.prefill(prompt_tokens) if i == 0 else Phase.decode([prompt_tokens + i - 1])
        prog = compile_step(ref, phase, chips, lay, sram, context, held)
        held = kv_after(prog, lower(ref.spec, phase, weights=PRECISION, kv=PRECISION), held)
        if mutate is not None:
            prog = mutate(prog, i)
        res = ex.run(prog, prompt if i == 0 else [tokens[-1]])
        tokens.append(int(res.tokens[0]))
        errors.append(float(np.abs(res.logits[0] - hf.logits[i]).max()))
        n_ins += res.instructions
        n_tr += res.transfers
        spans.append(res.makespan_cycles)
    err = max(errors)
    return EmulationReport(
        model=ref.spec.name, model_type=ref.spec.model_type, chips=chips, layout=lay.describe(),
        sram_bytes_per_chip=sram, seed=seed, prompt_tokens=prompt_tokens, steps=steps,
        tokens_match=tokens == hf.tokens, max_abs_logit_err=err, tolerance=tolerance,
        within_tolerance=err <= tolerance, reference_tokens=hf.tokens, emulated_tokens=tokens,
        step_errors=errors, instructions=n_ins, transfers=n_tr, makespan_cycles=spans,
    )


def emulate_config(cfg: dict[str, Any], chips: int, steps: int = 6, seed: int = 0, layout: str | None = None,
                   prompt_tokens: int = 8, sram_bytes: int | None = None) -> EmulationReport:
    """Build the HF reference from a config.json dict and emulate it (the CLI's entry point)."""
    validate_request(chips, steps, prompt_tokens)
    return emulate_reference(build_reference(cfg, seed), chips, steps, seed, layout, prompt_tokens, sram_bytes)
