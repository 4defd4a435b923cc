"""Interactive plotly charts for the HTML report. Every per-user speed carries context, concurrency, hardware."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lpxsim.engine.bands import band_interval
from lpxsim.report.curves import FRONTIER_COLUMN, deployment_curves
from lpxsim.report.hardware_text import hardware_words

PALETTE = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#4b5563"]
LAYOUT = dict(template="plotly_white", height=420, margin=dict(l=60, r=20, t=60, b=50),
              legend=dict(orientation="h", y=-0.2), font=dict(size=12))


def capacity_chart(df: pd.DataFrame) -> go.Figure:
    """Stacked memory bars (weights, reserve, KV in use, free) per context, one panel per system, GB."""
    systems = list(dict.fromkeys(df["system"]))
    titles = [hardware_words(str(df[df["system"] == s]["hardware"].iloc[0])) for s in systems]
    fig = make_subplots(rows=1, cols=len(systems), subplot_titles=titles)
    parts = (("weights_gb", "weights", "#2563eb"), ("reserve_gb", "buffers / reserve", "#94a3b8"),
             ("kv_gb", "KV of max streams", "#16a34a"), ("free_gb", "free", "#d1d5db"))
    for j, s in enumerate(systems, start=1):
        g = df[df["system"] == s]
        x = [f"{int(c):,} tokens" for c in g["context"]]
        for col, name, color in parts:
            fig.add_trace(go.Bar(x=x, y=g[col], name=name, marker_color=color, legendgroup=name, showlegend=j == 1,
                                 hovertemplate=f"{s} %{{x}}<br>{name}: %{{y:,.1f}} GB<extra></extra>"), row=1, col=j)
        fig.add_trace(go.Scatter(x=x, y=g["total_gb"] * 1.04, mode="text", showlegend=False, hoverinfo="skip",
                                 text=[f"<b>{n:,} streams</b>" for n in g["max_streams"]]), row=1, col=j)
        fig.update_yaxes(title_text="GB" if j == 1 else None, row=1, col=j)
    fig.update_layout(barmode="stack", title="Memory of one unit and the concurrency ceiling (streams that fit)",
                      **LAYOUT)
    return fig


def aa_chart(points: pd.DataFrame) -> go.Figure:
    """AA median per system and context, with the published figures as stars. The whisker is the error band of
    the system's cost path (tok_s_user_low .. tok_s_user_high, `lpxsim.engine.bands`) where the rows carry it:
    every request alike leaves P5-P95 a line, so the band is what says how far the bar may be off; P5-P95 is in
    the hover (and is the whisker of rows without a band)."""
    fig = go.Figure()
    for i, (system, g) in enumerate(points.groupby("system", sort=True)):
        g = g.sort_values("context")
        x = [f"{int(c):,}" for c in g["context"]]
        banded = {"tok_s_user_low", "tok_s_user_high"} <= set(g.columns) and g["tok_s_user_low"].notna().all()
        hi, lo = (g["tok_s_user_high"], g["tok_s_user_low"]) if banded else (g["speed_p95"], g["speed_p5"])
        what = f"<br>band: {g['band'].iloc[0]}" if banded and "band" in g else ""
        fig.add_trace(go.Bar(
            x=x, y=g["speed_median"], name=f"{system}: {hardware_words(str(g['hardware'].iloc[0]))} (simulated)",
            marker_color=PALETTE[i % 7],
            error_y=dict(type="data", symmetric=False, array=hi - g["speed_median"], arrayminus=g["speed_median"] - lo),
            customdata=g[["speed_p5", "speed_p95"]].to_numpy(),
            hovertemplate=f"{system}<br>context %{{x}} tokens, concurrency 1<br>median %{{y:,.0f}} tok/s "
                          f"(P5-P95 %{{customdata[0]:,.0f}}-%{{customdata[1]:,.0f}}){what}<extra></extra>",
        ))
    pub = points.dropna(subset=["published"])
    if len(pub):
        fig.add_trace(go.Scatter(
            x=[f"{int(c):,}" for c in pub["context"]], y=pub["published"], mode="markers+text",
            marker=dict(symbol="star", size=16, color="black"), name="published (Artificial Analysis)",
            text=[f"{v:,.0f} ({i})" for v, i in zip(pub["published"], pub["published_id"], strict=True)],
            textposition="top center",
        ))
    fig.update_layout(barmode="group", title="Artificial Analysis method: output tok/s per user, concurrency 1"
                      "<br><sup>whiskers: the error band of each system's cost path (lpxsim validate); a wider one "
                      "runs off the axis</sup>",
                      xaxis_title="input context (o200k tokens)", yaxis_title="output tok/s (o200k)", **LAYOUT)
    # the axis spans the bars and the stars: a ±205 % band would otherwise triple it and flatten every bar
    tops = [float(v) for v in list(points["speed_median"]) + list(pub["published"]) if v == v]
    if tops:
        fig.update_yaxes(range=[0, 1.3 * max(tops)])
    return fig


def frontier_chart(df: pd.DataFrame, y: str = "tok_s_total", y_title: str = "aggregate output tok/s") -> go.Figure:
    """Interactivity vs throughput, one panel per context, one line per system and deployment over concurrency;
    the Pareto set over every deployment of a system at a context (`on_frontier`, `on_frontier_mw`) drawn
    filled, the points it beats hollow."""
    ok = df[df["fits"].astype(bool)].dropna(subset=["tok_s_user", y]) if "fits" in df else df
    asked = df.groupby("context")["concurrency"].apply(lambda c: sorted(set(c))).to_dict()
    contexts = sorted(ok["context"].unique())
    fig = make_subplots(rows=1, cols=max(1, len(contexts)),
                        subplot_titles=[f"context {int(c):,} tokens" for c in contexts] or [""])
    curves = deployment_curves(ok)
    front = FRONTIER_COLUMN.get(y)
    for col, ctx in enumerate(contexts, start=1):
        for i, (name, rows) in enumerate(curves):
            g = rows[rows["context"] == ctx].sort_values("concurrency")
            if g.empty:
                continue
            # a concurrency asked for but missing here (did not fit, failed) leaves a gap, not a bridging line
            g = g.set_index("concurrency").reindex(asked[ctx]).reset_index()
            g["context"] = ctx
            hw = hardware_words(str(g["hardware"].dropna().iloc[0]))  # each context: its own deployment (hover)
            on = g[front].fillna(False).astype(bool) if front in g else pd.Series(True, index=g.index)
            ex, ey = _frontier_whiskers(g, y, on)
            fig.add_trace(go.Scatter(
                x=g["tok_s_user"], y=g[y], mode="lines+markers+text", name=name, connectgaps=False,
                error_x=ex, error_y=ey,
                legendgroup=name, showlegend=col == 1, line=dict(color=PALETTE[i % 7]),
                marker=dict(symbol=["circle" if f else "circle-open" for f in on], size=[9 if f else 6 for f in on]),
                text=[f"{int(c):,}" if c == c and v == v else "" for c, v in zip(g["concurrency"], g[y], strict=True)],
                textposition="top right", textfont=dict(size=9, color=PALETTE[i % 7]), cliponaxis=False,
                customdata=list(zip(g["concurrency"], g["context"], ["yes" if f else "no" for f in on], strict=True)),
                hovertemplate=f"{hw}<br>concurrency %{{customdata[0]}}, context %{{customdata[1]:,}}"
                              f"<br>%{{x:,.0f}} tok/s/user<br>%{{y:,.0f}} {y_title}"
                              "<br>on the Pareto set: %{customdata[2]}<extra></extra>",
            ), row=1, col=col)
        fig.update_xaxes(title_text="output tok/s per user", type="log", tickformat="~s", nticks=6, row=1, col=col)
        fig.update_yaxes(title_text=y_title if col == 1 else None, type="log", tickformat="~s", nticks=6,
                         row=1, col=col)
    fig.update_layout(title=dict(text=f"Per-user speed vs {y_title}<br><sup>each point labelled with its "
                                      "concurrent users (1 ... KV ceiling); filled: the Pareto set over every "
                                      "deployment of a system, its whiskers the answer's error band; hover: the "
                                      "deployment</sup>"),
                      **{**LAYOUT, "margin": dict(l=60, r=20, t=90, b=50)})
    return fig


def bars_chart(df: pd.DataFrame, x: str, ys: list[tuple[str, str]], title: str,
               bands: dict[str, str] | None = None) -> go.Figure:
    """Horizontal bars of several metrics per row label (e.g. tok/s/user and tok/s/MW per serving mode):
    one row per label, so long labels (a mode and its hardware) never overlap; values printed at the bars.
    `bands`: metric column -> the column of its error band in percent (`engine.bands`), drawn as whiskers from
    value / (1 + b) to value x (1 + b); a row without one has none."""
    fig = make_subplots(rows=1, cols=len(ys), subplot_titles=[t for _, t in ys], shared_yaxes=True,
                        horizontal_spacing=0.04)
    labels = list(df[x])[::-1]  # the first row on top
    for j, (col, _) in enumerate(ys, start=1):
        vals = list(df[col])[::-1]
        whiskers = None
        if bands and bands.get(col) in df:
            b = [float(v) / 100 if v is not None and v == v else 0.0 for v in list(df[bands[col]])[::-1]]
            ends = [band_interval(v, f) for v, f in zip(vals, b, strict=True)]
            whiskers = dict(type="data", symmetric=False, array=[hi - v for v, (_, hi) in zip(vals, ends, strict=True)],
                            arrayminus=[v - lo for v, (lo, _) in zip(vals, ends, strict=True)], color="#555",
                            thickness=1)
        fig.add_trace(go.Bar(y=labels, x=vals, orientation="h", showlegend=False, cliponaxis=False,
                             marker_color=[PALETTE[i % 7] for i in range(len(df))][::-1],
                             text=[f"{v:,.3g}" if abs(v) < 10 else f"{v:,.0f}" for v in vals], textposition="auto",
                             textangle=0, error_x=whiskers,
                             hovertemplate="%{y}: %{x:,.3g}<extra></extra>"), row=1, col=j)
        finite = [float(v) for v in vals if v == v]
        if whiskers is not None and finite:  # the axis spans the bars; a wide band's whisker runs off it
            fig.update_xaxes(range=[0, 1.3 * max(finite)], row=1, col=j)
    layout = {**LAYOUT, "height": max(LAYOUT["height"], 90 + 60 * len(df)), "margin": dict(l=20, r=20, t=90, b=40)}
    fig.update_layout(title=title, **layout)
    fig.update_yaxes(automargin=True)
    return fig


def occupancy_chart(timeline: pd.DataFrame, hardware: str) -> go.Figure:
    """Sessions resident (solid) and sequences running (dotted) above, KV occupancy below, against simulated
    time, one colour per retention policy."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1,
                        subplot_titles=["sessions resident (solid) and running (dotted)", "KV occupancy"])
    for i, (policy, g) in enumerate(timeline.groupby("policy", sort=False)):
        color = PALETTE[i % 7]
        fig.add_trace(go.Scatter(x=g["t_s"], y=g["sessions_resident"], name=f"{policy}: resident", mode="lines",
                                 line=dict(color=color, shape="hv"), legendgroup=policy,
                                 hovertemplate=f"{policy}<br>%{{x:,.1f}} s: %{{y}} sessions resident<extra></extra>"),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=g["t_s"], y=g["running"], name=f"{policy}: running", mode="lines",
                                 line=dict(color=color, dash="dot", shape="hv"), legendgroup=policy,
                                 hovertemplate=f"{policy}<br>%{{x:,.1f}} s: %{{y}} running<extra></extra>"),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=g["t_s"], y=g["kv_occupancy"], name=f"{policy}: KV", mode="lines",
                                 line=dict(color=color), legendgroup=policy, showlegend=False,
                                 hovertemplate=f"{policy}<br>%{{x:,.1f}} s: KV %{{y:.0%}} of capacity<extra></extra>"),
                      row=2, col=1)
    fig.update_yaxes(title_text="sessions", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="KV used / capacity", tickformat=".0%", range=[0, 1.05], row=2, col=1)
    fig.update_xaxes(title_text="simulated time (s)", row=2, col=1)
    fig.update_layout(title=dict(text=f"Agent sessions on {hardware_words(hardware)}: retention policies side by "
                                      "side"), **{**LAYOUT, "height": 560, "legend": dict(orientation="h", y=-0.14)})
    return fig


def _frontier_whiskers(g: pd.DataFrame, y: str, on: pd.Series) -> tuple[dict | None, dict | None]:
    """Error bars of a frontier curve's Pareto points (`engine.bands`): x from each answer's tok/s/user interval,
    y from its throughput band (tok/s total and per MW are tok/s per chip times a fixed count or over a fixed
    power); None where the rows carry no band. Only the filled points: the ones a planner would pick."""
    def arrays(lo: list[float], hi: list[float], v: list[float]) -> dict:
        keep = [bool(f) and a == a and b == b and x == x for f, a, b, x in zip(on, lo, hi, v, strict=True)]
        return dict(type="data", symmetric=False, thickness=1, width=3,
                    array=[b - x if k else 0.0 for k, b, x in zip(keep, hi, v, strict=True)],
                    arrayminus=[x - a if k else 0.0 for k, a, x in zip(keep, lo, v, strict=True)])

    ex = (arrays(list(g["tok_s_user_low"]), list(g["tok_s_user_high"]), list(g["tok_s_user"]))
          if {"tok_s_user_low", "tok_s_user_high"} <= set(g.columns) else None)
    ey = None
    if "tok_s_per_chip_band_pct" in g:
        v = list(g[y].astype(float))
        ends = [band_interval(x, f) for x, f in zip(v, g["tok_s_per_chip_band_pct"].astype(float) / 100, strict=True)]
        ey = arrays([lo for lo, _ in ends], [hi for _, hi in ends], v)
    return ex, ey


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    return f"rgba({int(h[0:2], 16)},{int(h[2:4], 16)},{int(h[4:6], 16)},{alpha})"


def speed_band_chart(df: pd.DataFrame) -> go.Figure:
    """Per-user speed against concurrency, one panel per context and one line per system, with the error band
    of each answer's cost path shaded around it (tok_s_user_low .. tok_s_user_high, `lpxsim.engine.bands`)."""
    ok = df[df["fits"].astype(bool)].dropna(subset=["tok_s_user"]) if "fits" in df else df
    contexts = sorted(ok["context"].unique())
    fig = make_subplots(rows=1, cols=max(1, len(contexts)),
                        subplot_titles=[f"context {int(c):,} tokens" for c in contexts] or [""])
    banded = {"tok_s_user_low", "tok_s_user_high"} <= set(ok.columns)
    for col, ctx in enumerate(contexts, start=1):
        for i, t in enumerate(sorted(ok["target"].unique())):
            g = ok[(ok["context"] == ctx) & (ok["target"] == t)].sort_values("concurrency")
            if g.empty:
                continue
            color = PALETTE[i % 7]
            band = g.dropna(subset=["tok_s_user_low", "tok_s_user_high"]) if banded else g.iloc[0:0]
            what = str(band["band"].iloc[0]) if len(band) and "band" in band else ""
            if len(band):
                fig.add_trace(go.Scatter(
                    x=list(band["concurrency"]) + list(band["concurrency"])[::-1],
                    y=list(band["tok_s_user_high"]) + list(band["tok_s_user_low"])[::-1], fill="toself",
                    mode="lines",  # plotly's default draws markers on a trace of under 20 points: stray dots
                    fillcolor=_rgba(color, 0.15), line=dict(width=0), hoverinfo="skip", legendgroup=t,
                    showlegend=False, name=f"{t} band"), row=1, col=col)
            hw = hardware_words(str(g["hardware"].dropna().iloc[0])) if "hardware" in g else t
            fig.add_trace(go.Scatter(
                x=g["concurrency"], y=g["tok_s_user"], mode="lines+markers", name=t, legendgroup=t,
                showlegend=col == 1, line=dict(color=color),
                customdata=(g[["tok_s_user_low", "tok_s_user_high"]].to_numpy() if banded else None),
                hovertemplate=f"{hw}<br>concurrency %{{x}}, context {int(ctx):,}<br>%{{y:,.0f}} tok/s/user"
                              + (f" (band %{{customdata[0]:,.0f}}-%{{customdata[1]:,.0f}}: {what})" if what else "")
                              + "<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title_text="concurrent users", type="log", dtick=0.30103, row=1, col=col)
        fig.update_yaxes(title_text="output tok/s per user" if col == 1 else None, type="log", tickformat="~s",
                         row=1, col=col)
    fig.update_layout(title=dict(text="Per-user speed by concurrency, with each answer's error band<br><sup>shaded: "
                                      "the validation error of the cost path that priced it (lpxsim validate)"
                                      "</sup>"), **{**LAYOUT, "margin": dict(l=60, r=20, t=90, b=50)})
    return fig
