"""`lpxsim emulate`: run a compiled LPX Program on numpy and compare it with the Hugging Face model."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.table import Table

from lpxsim.cli.common import emit_json, err, fmt_bytes, out
from lpxsim.cli.validate import count_option, path_option, seed_option
from lpxsim.core import inputs
from lpxsim.core.errors import UserError


def _table(r: dict) -> Table:
    ok = r["tokens_match"] and r["within_tolerance"]
    t = Table(title=f"{r['model']} on {r['chips']} emulated LPUs ({r['layout']}, {fmt_bytes(r['sram_bytes_per_chip'])} "
                    f"SRAM each): {'MATCH' if ok else 'MISMATCH'}")
    t.add_column("step")
    t.add_column("reference token", justify="right")
    t.add_column("emulated token", justify="right")
    t.add_column("max |logit error|", justify="right")
    for i, (a, b, e) in enumerate(zip(r["reference_tokens"], r["emulated_tokens"], r["step_errors"], strict=True)):
        t.add_row("prefill" if i == 0 else f"decode {i}", str(a), str(b), f"{e:.2e}")
    t.caption = (f"tolerance {r['tolerance']:.0e} (float32); {r['instructions']:,} instructions, "
                 f"{r['transfers']:,} transfers over {r['steps'] + 1} programs")
    return t


def register(app: typer.Typer) -> None:
    @app.command("emulate")
    def emulate(
        config: Path = path_option(..., "--config", help="A small Hugging Face config.json (gemma4_text, llama, "
                                    "mistral, mixtral, qwen3)."),
        chips: int = count_option(..., "--chips", help="Emulated LPUs to compile onto.", hi=4096, human=False),
        steps: int = count_option(6, "--steps", help="Greedy decode steps after the prefill.", lo=0,
                                  hi=inputs.EMULATE_STEPS_MAX,
                                  human=False),
        seed: int = seed_option(0, help="Seed of the random weights and the prompt."),
        layout: str = typer.Option(None, "--layout", help="Force a layout, e.g. tp=2,stages=2 (default: the "
                                   "compiler's search)."),
        prompt_tokens: int = count_option(8, "--prompt-tokens", help="Prompt length (prefill chunk).", hi=4096,
                                          human=False),
        sram_bytes: int = count_option(None, "--sram-bytes", help="SRAM per emulated chip (default: twice the "
                                       "bf16 weights spread over the chips, so the model must be split, at least "
                                       "the largest tensor, raised 1.25x until every step places).",
                                       hi=10**12, human=False),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ) -> None:
        """Compile a tiny model onto N emulated LPUs, run prefill + greedy decode on numpy, compare with HF."""
        from lpxsim.lpu.emulate.compare import emulate_config, validate_request
        from lpxsim.lpu.emulate.reference import check_emulatable, load_config
        from lpxsim.lpu.emulate.state import EmulationError

        if seed < 0:
            raise UserError("seed", f"expected a non-negative seed, got {seed}")
        if sram_bytes is not None and sram_bytes <= 0:
            raise UserError("sram_bytes", f"expected a positive byte count, got {sram_bytes}")
        from lpxsim.core.inputs import read_text

        read_text(config, "config")  # a missing, binary or huge file: one line before any work
        cfg = load_config(config)
        check_emulatable(cfg)
        window = cfg.get("max_position_embeddings")
        validate_request(chips, steps, prompt_tokens, window if isinstance(window, int) and window > 0 else None)
        if layout is not None:  # its syntax, and no more chips than the run has: one line before the reference
            from lpxsim.lpu.layout import Layout, parse_layout

            need = Layout(**{"tp": 1, "stages": 1, **parse_layout(layout)}).chips  # fields not given: searched, >= 1
            if need > chips:
                raise UserError("layout", f"{layout} needs {need:,} chips; --chips is {chips:,}")
        if not as_json:
            err.print(f"building the reference and compiling {steps + 1} programs ...")
        try:
            r = emulate_config(cfg, chips, steps=steps, seed=seed, layout=layout, prompt_tokens=prompt_tokens,
                               sram_bytes=sram_bytes).to_dict()
        except EmulationError as e:  # a finding about the compiled program, not a user mistake
            r = {"tokens_match": False, "max_abs_logit_err": None, "steps": steps, "chips": chips,
                 "error": str(e), "op": e.op, "chip": e.chip, "cycle": e.cycle}
            if as_json:
                emit_json(r)
            else:
                err.print(f"emulation failed: {e}")
            sys.exit(1)
        if as_json:
            emit_json(r)
        else:
            out.print(_table(r))
        if not (r["tokens_match"] and r["within_tolerance"]):
            sys.exit(1)
