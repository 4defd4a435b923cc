"""First-generation Groq (TSP v1, groq-v1): why batch-1 compiled speed is not the published per-user speed.

Compiles Llama-2-70B (INT8 weights) on 576 TSPs at 4,096-token context, prints the batch-1 step and its
mechanism breakdown, then models the public endpoint as served: a busy endpoint keeps one single-stream
micro-batch in every pipeline stage, so one user's token period is stages x the busiest stage's interval
(lpxsim.lpu.served). Nothing here is fitted to the published ~300 tok/s per user (TechPowerUp 2024-02:
"Llama 2 70B with 4096 token context length, Groq can serve 300 tokens/s"); it is only compared with.

Usage: python benchmarks/groq_v1_served.py
"""

from __future__ import annotations

from lpxsim.graph import Phase
from lpxsim.lpu import LpxStepModel
from lpxsim.lpu.served import full_pipeline_tok_s_user

POINTS = [  # (model, chips, context, weights, published per-user tok/s, source)
    ("llama-2-70b", 576, 4096, "int8", 300.0, "TechPowerUp 2024-02 (Groq endpoint, 576 chips)"),
    ("mixtral-8x7b", 576, 4096, "int8", 480.0, "TechPowerUp 2024-02 (Groq endpoint; chip count not published)"),
]


def main() -> None:
    print("| model | TSPs | context | layout | batch-1 tok/s | busiest stage (us) | served tok/s per user "
          "(stages x interval) | published | error |\n|---|---|---|---|---|---|---|---|---|")
    details = []
    for model, chips, ctx, w, pub, _src in POINTS:
        try:
            sm = LpxStepModel(model, "groq-v1", chips=chips, weights=w, context=ctx)
            t = sm.step_summary(Phase.decode([ctx]))["timing"]
        except Exception as e:  # noqa: BLE001 - report why it does not place
            print(f"| {model} | {chips} | {ctx:,} | does not place: {str(e)[:80]} | - | - | - | {pub:,.0f} | - |")
            continue
        stages = len(t["stage_spans_s"])
        served = full_pipeline_tok_s_user(t["latency_s"], t["interval_s"], stages)
        print(f"| {model} | {chips} | {ctx:,} | {sm.layout.describe()} | {1 / t['latency_s']:,.0f} | "
              f"{t['interval_s'] * 1e6:,.1f} | {served:,.0f} | {pub:,.0f} | {served / pub - 1:+.1%} |")
        details.append((model, t))
    for model, t in details:
        print(f"\n{model}: batch-1 step {t['latency_s'] * 1e6:,.1f} us by mechanism (fitted share "
              f"{t['fitted_share']:.1%}):\n\n| mechanism | us |\n|---|---|")
        for k, v in sorted(t["breakdown_us"].items(), key=lambda kv: -kv[1]):
            print(f"| {k} | {v:,.1f} |")


if __name__ == "__main__":
    main()
