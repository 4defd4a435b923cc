"""lpxsim's GPU backend on the Vidur side-by-side workload, and Vidur itself when it is installed (issue 10).

The work: the Azure LLM inference 2023 conversation trace (19,366 requests, replayed at its own
timestamps), a Llama-3-8B-class model (lpxsim: llama-3.1-8b, BF16) on one H100 (TP1), Sarathi-style
chunked prefill of 512 tokens per step (lpxsim: token_budget 512), batch cap 512.

lpxsim runs in fresh processes, first with an empty step cache (cold), then with what that run left
(warm); CPU is user + sys of the child. With --vidur-python and --vidur-root (a checkout of
microsoft/vidur 0.0.26 with its data/profiling folder; the PyPI wheel ships no profiles), the same
work runs through `python -m vidur.main` and the CPU ratio is printed.

Run: python benchmarks/bench_vidur.py [--vidur-python /work/vidur-venv/bin/python --vidur-root DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "src" / "lpxsim" / "data" / "traces" / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv"

LPXSIM = """
import sys
from lpxsim.serving import simulate
fleet = {"name": "vidur-side-by-side", "scheduler": {"token_budget": 512, "max_batch": 512},
         "pools": [{"name": "h100", "system": "h100-hgx", "backend": "gpu", "model": "llama-3.1-8b",
                    "workers": 1, "gpus_per_worker": 1, "tp": 1, "weights": "bf16", "kv": "bf16"}]}
res = simulate(fleet, {"name": "azure-conv", "kind": "trace", "trace": "azure-conv"}, seed=0)
print(res.summary["requests"], res.summary["completed"])
"""


def _child(cmd: list[str], env: dict, cwd: Path | None = None) -> tuple[float, float, str]:
    """(CPU s, wall s, stdout) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed: {res.stderr.strip()[-400:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, res.stdout.strip()


def vidur_trace(dst: Path) -> Path:
    """The Azure trace in Vidur's trace-replay columns (arrived_at s, num_prefill_tokens, num_decode_tokens)."""
    from datetime import datetime

    with TRACE.open() as f, dst.open("w", newline="") as g:
        rows = list(csv.DictReader(f))
        t0 = datetime.fromisoformat(rows[0]["TIMESTAMP"][:26])
        w = csv.writer(g)
        w.writerow(["arrived_at", "num_prefill_tokens", "num_decode_tokens"])
        for r in rows:
            t = (datetime.fromisoformat(r["TIMESTAMP"][:26]) - t0).total_seconds()
            w.writerow([f"{t:.6f}", r["ContextTokens"], max(1, int(r["GeneratedTokens"]))])
    return dst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3, help="warm runs (the median is reported)")
    ap.add_argument("--vidur-python", type=Path, help="a Python with vidur 0.0.26 installed")
    ap.add_argument("--vidur-root", type=Path, help="a vidur checkout holding data/profiling")
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "LPXSIM_CACHE": cache}
        env.pop("LPXSIM_NO_CACHE", None)
        cmd = [sys.executable, "-c", LPXSIM]
        cpu, wall, outp = _child(cmd, env)
        print(f"lpxsim gpu backend, cold cache: {cpu:.2f} s CPU, {wall:.2f} s wall ({outp} requests/completed)")
        warm = sorted(_child(cmd, env)[:2] for _ in range(args.runs))
        lpx_cpu, lpx_wall = warm[len(warm) // 2]
        print(f"lpxsim gpu backend, warm cache (median of {args.runs}): {lpx_cpu:.2f} s CPU, {lpx_wall:.2f} s wall")
    if args.vidur_python is None:
        print("vidur: not run (give --vidur-python and --vidur-root)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        trace = vidur_trace(Path(tmp) / "azure_conv_vidur.csv")
        cmd = [str(args.vidur_python), "-m", "vidur.main", "--replica_config_device", "h100",
               "--replica_config_model_name", "meta-llama/Meta-Llama-3-8B", "--cluster_config_num_replicas", "1",
               "--replica_config_tensor_parallel_size", "1", "--replica_config_num_pipeline_stages", "1",
               "--replica_scheduler_config_type", "sarathi", "--sarathi_scheduler_config_chunk_size", "512",
               "--sarathi_scheduler_config_batch_size_cap", "512", "--request_generator_config_type",
               "trace_replay", "--trace_request_generator_config_trace_file", str(trace),
               "--metrics_config_output_dir", tmp]
        v_cpu, v_wall, _ = _child(cmd, dict(os.environ), cwd=args.vidur_root)
    print(f"vidur 0.0.26: {v_cpu:.2f} s CPU, {v_wall:.2f} s wall; lpxsim (warm) is {v_cpu / lpx_cpu:.1f}x faster in CPU")


if __name__ == "__main__":
    main()
