"""First-generation Groq (TSP v1, groq-v1): batch-1 compiled speed against the published served per-user speed.

For each public Groq figure (Feb 2024, TechPowerUp / LLMPerf; `data/measured/published_points.csv`) prints the
compiled batch-1 step, the shared endpoint's loaded ceiling (the most streams the KV holds, in the micro-batch
split that serves them best), the full-pipeline figure of issue 13 (one stream per stage; more streams than
the KV holds where `users` < stages), the predicted range with the host/API path per token
(`engine.sram_range.HOST_TOKEN_S`, an assumption), and the host time per token each figure implies. Nothing
here is fitted to the figures; they are only compared with. Then the batch-1 step's mechanism breakdown.

Usage: python benchmarks/groq_v1_served.py
"""

from __future__ import annotations

from lpxsim.engine.sram_range import HOST_TOKEN_S, implied_host_s, predicted_range
from lpxsim.engine.validation import published_points
from lpxsim.graph import Phase
from lpxsim.lpu import LpxStepModel


def main() -> None:
    pts = [p for p in published_points() if p["system"] == "groq-v1"]
    lo_ms, hi_ms = (1e3 * h for h in HOST_TOKEN_S)
    print(f"| model | context | TSPs used (layout) | batch-1 | full pipeline (stages) | KV-full (users) | "
          f"range, host {lo_ms:g}-{hi_ms:g} ms/token | published | implied host ms/token |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for p in pts:
        r = predicted_range(p)
        pub = float(p["value"])
        print(f"| {p['model']} | {int(p['context']):,} | {r['chips']} ({r['layout']}) | {r['batch1_tok_s_user']:,.0f} | "
              f"{r['pipeline_full_tok_s_user']:,.0f} ({r['stages']}) | {r['kv_full_tok_s_user']:,.0f} "
              f"({r['loaded_users']}) | {r['low_tok_s_user']:,.0f} .. {r['high_tok_s_user']:,.0f} | {pub:,.0f} | "
              f"{1e3 * implied_host_s(pub, r['batch1_tok_s_user']):.2f} |")
    for p in pts:
        ctx = int(p["context"])
        sm = LpxStepModel(p["model"], "groq-v1", chips=int(p["chips"]), weights=p["weights"], context=ctx)
        t = sm.step_summary(Phase.decode([ctx]))["timing"]
        print(f"\n{p['model']}: batch-1 step {t['latency_s'] * 1e6:,.1f} us by mechanism (fitted share "
              f"{t['fitted_share']:.1%}):\n\n| mechanism | us |\n|---|---|")
        for k, v in sorted(t["breakdown_us"].items(), key=lambda kv: -kv[1]):
            print(f"| {k} | {v:,.1f} |")


if __name__ == "__main__":
    main()
