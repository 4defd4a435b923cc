"""First-generation Groq (TSP v1, groq-v1): why batch-1 compiled speed is not the published per-user speed.

Compiles Llama-2-70B (INT8 weights) on 576 TSPs at 4,096-token context, prints the batch-1 step and its
mechanism breakdown, then models the public endpoint as served: `users` single-stream micro-batches share
the pipeline (lpxsim.lpu.served). `users` is the one first-generation parameter fitted, on this point alone
(the published ~300 tok/s per user, TechPowerUp 2024-02 quoting Groq/LLMPerf: "Llama 2 70B with 4096 token
context length, Groq can serve 300 tokens/s"); the other rows are predictions with it.

Usage: python benchmarks/groq_v1_served.py [--write]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from pathlib import Path

from lpxsim.graph import Phase
from lpxsim.lpu import LpxStepModel
from lpxsim.lpu.served import served_tok_s_user

FIT_POINT = {"id": "groq-llama2-70b", "model": "llama-2-70b", "system": "groq-v1", "chips": 576, "context": 4096,
             "weights": "int8", "tok_s_user": 300.0,
             "source": "TechPowerUp news 2024-02 (Groq LPU, Llama 2 70B at 4096 context: 300 tok/s); 576 chips: "
                       "Groq's public description of the system behind its Llama 2 70B endpoint (S)"}
PREDICT = [  # (model, context, weights, published per-user tok/s or None, source)
    ("mixtral-8x7b", 4096, "int8", 480.0, "TechPowerUp 2024-02: Mixtral 8x7B at 480 tok/s"),
]
OUT = Path(__file__).resolve().parents[1] / "src/lpxsim/catalog/fitted/lpx_fit.json"


def step(model: str, context: int, weights: str) -> tuple[LpxStepModel, dict]:
    sm = LpxStepModel(model, "groq-v1", chips=FIT_POINT["chips"], weights=weights, context=context)
    return sm, sm.step_summary(Phase.decode([context]))["timing"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="store the fitted users in lpx_fit.json ('served')")
    args = ap.parse_args()
    sm, t = step(FIT_POINT["model"], FIT_POINT["context"], FIT_POINT["weights"])
    lat, ii = t["latency_s"], t["interval_s"]
    users = 1.0 / (FIT_POINT["tok_s_user"] * ii)  # closed form: the period is users x interval above latency
    users = max(1.0, round(users, 1))
    print(f"## groq-v1: Llama-2-70B INT8 on 576 TSPs, 4K context ({sm.layout.describe()})\n")
    print(f"batch-1 step {lat * 1e6:,.1f} us = {1 / lat:,.0f} tok/s per user; busiest stage {ii * 1e6:,.1f} us; "
          f"fitted share {t['fitted_share']:.1%}; streams the SRAM holds at 4K: {sm.max_batch()}\n")
    print("| mechanism | us |\n|---|---|")
    for k, v in sorted(t["breakdown_us"].items(), key=lambda kv: -kv[1]):
        print(f"| {k} | {v:,.1f} |")
    print(f"\nfitted users in flight: {users} (period = users x interval = {users * ii * 1e6:,.0f} us)\n")
    print("| model | context | batch-1 tok/s | served tok/s per user | published | role |\n|---|---|---|---|---|---|")
    print(f"| llama-2-70b | 4,096 | {1 / lat:,.0f} | {served_tok_s_user(lat, ii, users):,.0f} | "
          f"{FIT_POINT['tok_s_user']:,.0f} | fit (users) |")
    for model, ctx, w, pub, _src in PREDICT:
        try:
            _, tp = step(model, ctx, w)
        except Exception as e:  # noqa: BLE001 - report why it does not place
            print(f"| {model} | {ctx:,} | does not place: {e} | - | {pub} | prediction |")
            continue
        served = served_tok_s_user(tp["latency_s"], tp["interval_s"], users)
        print(f"| {model} | {ctx:,} | {1 / tp['latency_s']:,.0f} | {served:,.0f} | "
              f"{'-' if pub is None else f'{pub:,.0f}'} | prediction |")
    if args.write:
        doc = json.loads(OUT.read_text())
        doc.setdefault("served", {})["groq-v1"] = {
            "users": users, "unit": "single-stream micro-batches in flight",
            "meaning": "users sharing the pipeline of the public endpoint (lpxsim.lpu.served)",
            "solver": "closed form users = 1 / (tok_s_user x busiest-stage interval), rounded to 0.1",
            "fitted_to": FIT_POINT, "layout": sm.layout.describe(),
            "batch1_tok_s_user": round(1 / lat, 1), "interval_s": ii,
        }
        assert math.isfinite(users)
        fd, tmp = tempfile.mkstemp(dir=OUT.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh, indent=2)
            fh.write("\n")
        os.replace(tmp, OUT)
        print(f"\nwrote 'served' into {OUT}")


if __name__ == "__main__":
    main()
