"""Digests of compiled LPX programs: one hash per case over everything a compile produces.

A compiler speed change must leave every program byte-identical; run this on the tree before and after
(`PYTHONPATH=<tree>/src python benchmarks/program_digest.py [case ...]`) and compare the lines. The hash
covers, in order: every instruction (all fields, attrs and slice included), transfer, buffer (in the
program's order), region and link; the program's meta (the critical-path breakdown), phase and layout;
the makespan; the timing summary (`Timing.as_dict`, tok_s_user included); the per-chip memory summary and
the verify report. The tiny case also runs the numpy emulator over the compiled programs and hashes its
tokens and logit errors.

Cases: gemma-decode / gemma-prefill (Gemma 4 31B step-model layout, decode batch 1 at 10K and a 256-row
prefill chunk), gpt-oss-decode / gpt-oss-prefill (gpt-oss-120b on 2 racks, decode at 8K, 256 rows at 1K),
deepseek (DeepSeek-V3 on 8 racks at 8K, `compile_program`), tiny (llama_tiny on 8 chips with the emulator).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

STEP = {
    "gemma-decode": ("gemma-4-31b", None, ("decode", 10_000, 1)),
    "gemma-prefill": ("gemma-4-31b", None, ("prefill", 256, 0)),
    "gpt-oss-decode": ("gpt-oss-120b", 2, ("decode", 8192, 1)),
    "gpt-oss-prefill": ("gpt-oss-120b", 2, ("prefill", 256, 1024)),
}
ALL = [*STEP, "deepseek", "tiny"]
TESTS_DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "emulate"


def _phase(kind: str, n: int, ctx: int):  # noqa: ANN202
    from lpxsim.graph import Phase

    if kind == "decode":
        return Phase.decode([n])
    return Phase.prefill(n, ctx)


def digest_result(res) -> tuple[str, dict]:  # noqa: ANN001
    """sha256 over a CompileResult's program, timing, memory and report; with a few headline figures."""
    p = res.program
    h = hashlib.sha256()

    def put(x: object) -> None:
        h.update(repr(x).encode())
        h.update(b"\n")

    for i in p.instructions:
        put((i.id, i.chip, i.unit, i.op, i.kind, i.inputs, i.output, i.cycle_start, i.first_out_cycle,
             i.cycle_end, sorted(i.slice.items()), sorted(i.attrs.items())))
    for t in p.transfers:
        put(t)
    for k, b in p.buffers.items():
        put((k, b))
    for r in p.regions:
        put(r)
    for k, lk in sorted(p.links.items()):
        put((k, lk))
    put(sorted(p.meta.items(), key=lambda kv: kv[0]))
    put((p.phase, p.layout, p.system, p.model, p.weights, p.kv, p.kv_layout, p.clock_hz, p.chip_sram_bytes))
    put(p.makespan_cycles)
    put(sorted(res.timing.as_dict().items()))
    put(sorted((c, sorted(v.items())) for c, v in res.memory.items()))
    put((res.report.ok, res.report.errors, res.report.skipped))
    return h.hexdigest(), {"instructions": len(p.instructions), "transfers": len(p.transfers),
                           "makespan": p.makespan_cycles, "tok_s_user": res.timing.tok_s_user}


def run(case: str) -> dict:
    """Compile one case in this process and digest it."""
    os.environ["LPXSIM_CACHE"] = tempfile.mkdtemp()
    c0 = time.process_time()
    if case in STEP:
        from lpxsim.lpu import LpxStepModel

        model, racks, (kind, n, ctx) = STEP[case]
        m = LpxStepModel(model, racks=racks)
        c0 = time.process_time()
        res = m.compile(_phase(kind, n, ctx))
        out = digest_result(res)
    elif case == "deepseek":
        from lpxsim.lpu import compile_program

        res = compile_program("deepseek-v3", "lpx", racks=8, context=8192)
        out = digest_result(res)
    elif case == "tiny":
        out = _tiny()
    else:
        raise SystemExit(f"unknown case {case!r}; one of {', '.join(ALL)}")
    return {"case": case, "digest": out[0], **out[1], "cpu_s": round(time.process_time() - c0, 2)}


def _tiny() -> tuple[str, dict]:
    """llama_tiny on 8 chips (tp=4, 2 stages, 2-way KV split): prefill + 3 decode steps, emulated."""
    from lpxsim.graph import Phase
    from lpxsim.lpu import compile_program
    from lpxsim.lpu.emulate.compare import PRECISION, default_sram_bytes, emulate_reference
    from lpxsim.lpu.emulate.reference import build_reference, load_config

    ref = build_reference(load_config(TESTS_DATA / "llama_tiny.json"), seed=0)
    lay = "tp=4,stages=2,kvsplit=2"
    sram = default_sram_bytes(ref, 8, lay)
    h = hashlib.sha256()
    for ph in (Phase.prefill(8), Phase.decode([9]), Phase.decode([10, 11])):
        res = compile_program(ref.spec, "lpx", chips=8, phase=ph, weights=PRECISION, kv=PRECISION, layout=lay,
                              chip_sram_bytes=sram, context=16)
        h.update(digest_result(res)[0].encode())
    r = emulate_reference(ref, 8, steps=3, seed=0, layout=lay)
    h.update(repr((r.emulated_tokens, r.step_errors, r.makespan_cycles, r.instructions, r.transfers)).encode())
    return h.hexdigest(), {"tokens_match": r.tokens_match, "max_abs_logit_err": r.max_abs_logit_err}


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--one"]:
        print(json.dumps(run(args[1])))
        return
    import subprocess

    for case in args or ALL:  # each case in a fresh process (memory, and no state shared between cases)
        out = subprocess.run([sys.executable, __file__, "--one", case], capture_output=True, text=True, check=True)
        print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
