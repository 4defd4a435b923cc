"""The event loop's speed-ups (issue 27's fleet benchmark) change no result.

`tests/data/serving_golden.json` holds the summaries and per-request time sums of a few runs as the
simulator gave them before those speed-ups (every pipelined first token an event that cut the decode run;
the cyclic GC left on): first at commit 3402248, regenerated at ec7df77 (the engine's deployment sizing
and the GPU refit change the step models; that tree's simulator, without the speed-ups, gave this file and
the tree with them gives the same numbers). The three session cases whose contexts reach their cap were
regenerated with the `hold` deadlock fix (a truncated session's stale chain stops being held when its turn
arrives, `KvStore.retire_stale`): a change meant to change results. `lpx-offload-sessions` and `routed-mix` were
regenerated when an LPX prefill's sub-chunk size stopped depending on the shapes asked before (a chunk too large
for 256 rows used to halve it for every later chunk, so a run's costs depended on the cache's history).
`mixed-fleet-sessions`, `rubin-vera-offload` and `routed-mix` were regenerated when an SGLang GPU pool's first token
came out at the end of its prefill pass rather than after the step's decodes (`EngineParams.prefill_alone`:
SGLang runs a prefill batch as its own forward; TTFT about 5 ms lower on Rubin, one decode step). The same four were
regenerated when the GPU engine parameters were refitted (round 3, seventh session: TensorRT-LLM's attention-DP MoE
gather and scatter from the measured NCCL sweep, and its prefill iterations carrying the running decodes; the
refit moved SGLang's first-token host time 63.0 -> 62.7 ms and the shared eager dispatch 48.9 -> 49.1 us: makespans
within 2 %). The GPU runs were regenerated again in round 3's eleventh session, for two step-cost fixes meant to
change results: a CUDA graph's padding rows read no KV (the padded batch's mean context counts them at 0), and a
projected GPU's collectives scale their smallest message's time by the latencies and the rest by the bus bandwidths
(Rubin's eager prefill all-reduces keep their launch latency; its step no longer drops at a 256 KiB message).
The four GPU runs were regenerated in round 3's thirteenth session for a refit meant to change results (SGLang's
prefill on Hopper priced in the MHA form it runs: first-token host time 62.7 -> 65.3 ms, eager dispatch 49.1 ->
48.0 us); per-request times moved under 2 %, but the session runs' makespans are set by a few requests that
wait tens of seconds, so they moved more (pd-sessions 250 -> 206 s, mixed-fleet-sessions 59.7 -> 52.6 s).
The four GPU runs were regenerated in round 3's sixteenth session for corrections and a refit meant to change results
(SGLang's absorbed BMMs in BF16, NVFP4 DeepSeek's BF16 projections, the fit at each configuration's latest date:
SGLang's step host time 0.974 -> 1.461 ms; makespans rubin-vera-offload 105 -> 116 s, pd-sessions 206 -> 236 s,
mixed-fleet-sessions 52.6 -> 57.9 s, routed-mix 101.8 -> 102.7 s).
In round 3's twenty-second session every run gained a column (`decode_start_s`: when a decode worker took a
prefilled request), and `pd-sessions` was regenerated for a change meant to change results: a prefill worker's
first token reaches the client with the decode worker's stream, when that worker takes the request (Dynamo's flow,
DYN-SGL-DISAGG), so a request's wait for a decode slot is in its TTFT, no longer in its TPOT (TTFT mean 0.14 ->
2.44 s, p99 0.49 -> 91 s; TPOT mean 7.2 -> 0.29 ms, p99 235 -> 0.29 ms; p50s within 1 %; the other five runs
unchanged but for the new column).
In round 3's twenty-third session `pd-sessions` was regenerated again for a change meant to change results: a
prefilled request's KV stays charged to its prefill worker until a decode worker has taken the request and allocated
room, then crosses (it had crossed at once and been charged nowhere while it waited; TRT-DISAGG), and the decode
worker starts it when the KV has arrived. The decode pool's admissions and session evictions move (35 -> 45), so
the waits that set the tail do too: TTFT p99 91 -> 69 s, mean 2.44 -> 2.23 s, makespan 236 -> 221 s; the
prefill pool's KV peak 3.5 -> 4.8 % (the prompts it now holds); p50s within 1 %; the other five runs unchanged.
In round 3's twenty-sixth session the four GPU runs were regenerated for a change meant to change results: a GPU
answer prices its engine's latest release (assumption "engine-release"; SGLang's step host time 1.543 -> 1.275 ms):
Rubin's ITL p50 5.3 -> 5.1 ms, makespans rubin-vera-offload 117.6 -> 108.0 s, routed-mix 102.8 -> 102.3 s,
mixed-fleet-sessions 53.9 -> 53.7 s (its evictions 66 -> 79), pd-sessions 221.3 s (its decode pool is LPX).
The same runs must give the same numbers now: integers and
strings equal, floats equal to 1e-12 relative (float noise only). Regenerate the file only for a change
that is meant to change results, and say so in its commit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lpxsim.serving import simulate

GOLDEN = Path(__file__).parent / "data" / "serving_golden.json"

# the benchmark's mixed fleet (benchmarks/bench_sessions.py), at test scale: LPX and Rubin replicas whose
# prefill's first token leaves after the step (pipelined), KV-aware routing, `hold` retention
MIXED = {"name": "mixed", "pools": [
    {"name": "lpx", "system": "lpx", "backend": "lpx", "model": "gemma-4-31b", "workers": 2, "racks_per_worker": 1},
    {"name": "rubin", "system": "vr-nvl72", "backend": "gpu", "model": "gemma-4-31b", "workers": 4,
     "gpus_per_worker": 8},
], "router": {"policy": "kv"}, "retention": {"policy": "hold"}}
SESSIONS = {"name": "sessions", "kind": "agentic", "num_requests": 150, "arrival": {"process": "poisson", "rate": 10.0},
            "session": {"turns": 8, "first_isl": 8000, "new_tokens": {"kind": "uniform", "low": 1000, "high": 2000},
                        "think_s": {"kind": "exponential", "mean": 2.0}, "context_cap": 20_000},
            "osl": {"kind": "uniform", "low": 200, "high": 400}}

CASES = {
    "mixed-fleet-sessions": (MIXED, SESSIONS),
    "lpx-agentic-100k": ("examples/fleets/lpx-alone.yaml", "examples/workloads/agentic-100k.yaml"),
    "lpx-offload-sessions": ("examples/fleets/lpx-host-offload.yaml", "examples/workloads/agentic-sessions.yaml"),
    "rubin-vera-offload": ("examples/fleets/rubin-vera-offload.yaml", "examples/workloads/agentic-100k-c16.yaml"),
    "pd-sessions": ("examples/fleets/rubin-lpx-pd-sessions.yaml", "examples/workloads/agentic-sessions.yaml"),
    "routed-mix": ("examples/fleets/routed-mix.yaml", "examples/workloads/mixed-classes.yaml"),
}


def fingerprint(res) -> dict:
    """What a run must reproduce: its summary (less the engine's event count, a cost, not a result) and sums
    of every request's times and tokens."""
    s = {k: v for k, v in res.summary.items() if k != "events"}
    d = res.requests
    sums = {c: float(d[c].fillna(-1.0).sum()) for c in d.columns if d[c].dtype.kind in "if"}
    return json.loads(json.dumps({"summary": s, "request_sums": sums}, default=str))


def _same(a, b, path: str) -> None:
    if isinstance(a, dict):
        assert set(a) == set(b), f"{path}: keys {sorted(set(a) ^ set(b))}"
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{path}: length"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        if math.isnan(a):
            assert math.isnan(b), path
        else:
            assert b == pytest.approx(a, rel=1e-12, abs=1e-12), f"{path}: {a!r} -> {b!r}"
    else:
        assert a == b, f"{path}: {a!r} -> {b!r}"


@pytest.mark.parametrize("name", list(CASES))
def test_results_match_before_the_speedups(name: str) -> None:
    fleet, workload = CASES[name]
    want = json.loads(GOLDEN.read_text())[name]
    _same(want, fingerprint(simulate(fleet, workload, seed=3)), name)
