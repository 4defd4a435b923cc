"""NVIDIA aiperf against `lpxsim serve`, checked against `simulate` on the same requests.

For each concurrency (1, 4, 16) a fresh `lpxsim serve` (the rubin-alone example fleet unless --fleet is
given) runs at `--time-scale` on a free 127.0.0.1 port, and `aiperf profile` streams a bounded number of
synthetic chat requests at it (fixed ISL/OSL, server token counts, the `builtin` o200k tokenizer, loaded
offline from the BPE file bpe-openai ships). aiperf's own per-request records give each request's start
time and prompt tokens; those requests (arrival = start / time scale) are replayed through `simulate`
as a trace. The medians aiperf measures, divided by the time scale, are compared with simulate's:
TTFT, and inter-token latency (aiperf's ITL is per request (E2E - TTFT) / (OSL - 1), simulate's TPOT).
Target (issue 29 item 3): within 5 %.

aiperf lives in its own virtual environment (it pins its own numpy, pandas, transformers): pass its
executable with --aiperf (default: /work/aiperf-venv/bin/aiperf; `python -m venv V && V/bin/pip install
aiperf`).

Usage: python benchmarks/serve_aiperf.py [--time-scale 40] [--isl 500] [--osl 50] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
REQUESTS = {1: 8, 4: 16, 16: 64}  # bounded: a few rounds of each concurrency


def tiktoken_cache(d: Path) -> Path:
    """A TIKTOKEN_CACHE_DIR holding o200k_base from bpe-openai's wheel (tiktoken would download it)."""
    import bpe_openai

    raw = gzip.decompress((Path(bpe_openai.__file__).parent / "data" / "o200k_base.tiktoken.gz").read_bytes())
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(TIKTOKEN_URL.encode()).hexdigest()).write_bytes(raw)
    return d


def start_server(fleet: Path, scale: float) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "lpxsim.cli.main", "serve", "--fleet", str(fleet), "--port", "0",
                             "--time-scale", str(scale)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            env=env, text=True)
    address = None
    for line in proc.stderr:
        m = re.search(r"on (http://127\.0\.0\.1:\d+)/v1", line)
        address = m.group(1) if m else address
        if "ready" in line or "failed" in line:
            break
    if address is None:
        proc.kill()
        raise SystemExit("the server printed no address")
    return proc, address


def run_aiperf(aiperf: str, base: str, conc: int, n: int, isl: int, osl: int, out: Path, tik: Path) -> list[dict]:
    cmd = [aiperf, "profile", "--model", "gemma-4-31b", "--url", base, "--endpoint-type", "chat", "--streaming",
           "--concurrency", str(conc), "--request-count", str(n), "--synthetic-input-tokens-mean", str(isl),
           "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(osl), "--output-tokens-stddev", "0",
           "--tokenizer", "builtin", "--use-server-token-count", "--artifact-dir", str(out), "--ui-type", "none"]
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tik)}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"aiperf failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    rows = [json.loads(x) for x in (out / "profile_export.jsonl").read_text().splitlines() if x.strip()]
    return [r for r in rows if r["metadata"].get("benchmark_phase") == "profiling"]


def simulate_same(fleet: Path, rows: list[dict], scale: float, tmp: Path):
    """The aiperf requests replayed through `simulate` (a Mooncake-format trace: ms timestamps, no shared prefix)."""
    from lpxsim.serving import simulate
    from lpxsim.serving.workload import WorkloadConfig

    t0 = min(r["metadata"]["request_start_ns"] for r in rows)
    trace = tmp / "aiperf_requests.jsonl"
    with trace.open("w") as f:
        for r in sorted(rows, key=lambda r: r["metadata"]["request_start_ns"]):
            m = r["metrics"]
            f.write(json.dumps({"timestamp": (r["metadata"]["request_start_ns"] - t0) / 1e6 / scale,
                                "input_length": int(m["usage_prompt_tokens"]["value"]),
                                "output_length": int(m["usage_completion_tokens"]["value"]), "hash_ids": []}) + "\n")
    return simulate(fleet, WorkloadConfig(name="aiperf", kind="trace", trace=str(trace)))


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def one(aiperf: str, fleet: Path, conc: int, a, tmp: Path, tik: Path) -> dict:
    proc, base = start_server(fleet, a.time_scale)
    try:
        rows = run_aiperf(aiperf, base, conc, REQUESTS[conc], a.isl, a.osl, tmp / f"c{conc}", tik)
    finally:
        proc.terminate()
        proc.wait(10)
    ttft = [r["metrics"]["time_to_first_token"]["value"] / 1e3 / a.time_scale for r in rows]
    itl = [r["metrics"]["inter_token_latency"]["value"] / 1e3 / a.time_scale for r in rows]
    df = simulate_same(fleet, rows, a.time_scale, tmp).requests
    sim_ttft, sim_itl = float(df["ttft_s"].median()), float(df["tpot_s"].median())
    return {"concurrency": conc, "requests": len(rows), "isl_median": median(
        [r["metrics"]["usage_prompt_tokens"]["value"] for r in rows]), "osl": a.osl,
            "served_ttft_ms": median(ttft) * 1e3, "simulated_ttft_ms": sim_ttft * 1e3,
            "ttft_error": median(ttft) / sim_ttft - 1, "served_itl_ms": median(itl) * 1e3,
            "simulated_itl_ms": sim_itl * 1e3, "itl_error": median(itl) / sim_itl - 1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aiperf", default="/work/aiperf-venv/bin/aiperf")
    ap.add_argument("--fleet", type=Path, default=ROOT / "examples" / "fleets" / "rubin-alone.yaml")
    ap.add_argument("--time-scale", type=float, default=40.0)
    ap.add_argument("--isl", type=int, default=500)
    ap.add_argument("--osl", type=int, default=50)
    ap.add_argument("--concurrency", type=int, nargs="*", default=[1, 4, 16])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    aiperf = shutil.which(a.aiperf) or a.aiperf
    if not Path(aiperf).exists():
        raise SystemExit(f"aiperf not found at {a.aiperf}: python -m venv V && V/bin/pip install aiperf")
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        tik = tiktoken_cache(tmp / "tiktoken")
        results = [one(aiperf, a.fleet, c, a, tmp, tik) for c in a.concurrency]
    ok = all(abs(r["ttft_error"]) <= 0.05 and abs(r["itl_error"]) <= 0.05 for r in results)
    if a.json:
        print(json.dumps({"time_scale": a.time_scale, "fleet": str(a.fleet), "results": results, "within_5pct": ok}))
    else:
        print(f"{'conc':>4} {'reqs':>5} {'TTFT served ms':>15} {'simulated':>10} {'err':>7} "
              f"{'ITL served ms':>14} {'simulated':>10} {'err':>7}")
        for r in results:
            print(f"{r['concurrency']:>4} {r['requests']:>5} {r['served_ttft_ms']:>15.2f} {r['simulated_ttft_ms']:>10.2f} "
                  f"{r['ttft_error']:>+7.1%} {r['served_itl_ms']:>14.3f} {r['simulated_itl_ms']:>10.3f} "
                  f"{r['itl_error']:>+7.1%}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
