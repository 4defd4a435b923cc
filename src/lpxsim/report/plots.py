"""Static PNG charts (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

from lpxsim.bench.store import atomic_write_bytes  # noqa: E402
from lpxsim.engine.bands import band_interval  # noqa: E402
from lpxsim.report.curves import FRONTIER_COLUMN, deployment_curves  # noqa: E402


def _save(fig, path: Path) -> Path:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(Path(path), buf.getvalue())
    return Path(path)


def frontier_png(df: pd.DataFrame, path: str | Path, y: str = "tok_s_total",
                 y_label: str = "aggregate output tok/s (per replica)") -> Path:
    """Interactivity vs throughput: one panel per context, one line per system/mode over concurrency."""
    ok = df[df["fits"].astype(bool)] if "fits" in df else df
    ok = ok.dropna(subset=["tok_s_user", y]) if {"tok_s_user", y} <= set(ok.columns) else ok.iloc[0:0]
    contexts = sorted(ok["context"].unique()) if len(ok) else [0]
    fig, axes = plt.subplots(1, len(contexts), figsize=(5.2 * len(contexts), 4.2), squeeze=False)
    for ax, ctx in zip(axes[0], contexts, strict=True):
        sub = ok[ok["context"] == ctx] if len(ok) else ok
        for _name, g in deployment_curves(sub):  # one line per system and deployment (GPU pick, LPX size)
            g = g.sort_values("concurrency")
            hw = g["hardware"].iloc[0] if "hardware" in g else _name
            front = FRONTIER_COLUMN.get(y)
            ax.plot(g["tok_s_user"], g[y], marker="o", label=hw, fillstyle="none")
            if front in g:  # the Pareto set over every deployment of the system at this context, filled
                f = g[g[front].fillna(False).astype(bool)]
                color = ax.lines[-1].get_color()
                ax.plot(f["tok_s_user"], f[y], "o", color=color, markersize=7)
                xerr, yerr = _band_errors(f, y)  # its answers' error bands (`engine.bands`)
                if xerr is not None or yerr is not None:
                    ax.errorbar(f["tok_s_user"], f[y], xerr=xerr, yerr=yerr, fmt="none", ecolor=color,
                                elinewidth=0.8, capsize=2, alpha=0.7)
            for _, r in g.iterrows():
                ax.annotate(f"c={int(r['concurrency'])}", (r["tok_s_user"], r[y]), fontsize=7,
                            textcoords="offset points", xytext=(3, 3))
        if sub.empty:
            ax.text(0.5, 0.5, "no operating point fits", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("output tok/s per user")
        ax.set_ylabel(y_label)
        ax.set_title(f"context {int(ctx):,} tokens")
        if len(sub):
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
            ax.yaxis.set_minor_formatter(NullFormatter())
            # the axis spans the points; a wide band's whisker runs off its edge (a ±205 % LPX band would
            # otherwise triple the axis and squeeze every point into a third of it)
            ax.set_xlim(left=0, right=1.12 * float(sub["tok_s_user"].max()))
        ax.grid(True, which="both", alpha=0.3)
        if len(sub):  # per panel: each context runs on its own deployment (bench.backends.workload_step_model)
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=6, frameon=False)
    fig.suptitle("Interactivity vs throughput (c = concurrency; each point at its context and hardware; filled: the "
                 "Pareto set, whiskers: its error band)", fontsize=10)
    fig.tight_layout()
    return _save(fig, Path(path))


def _band_errors(f: pd.DataFrame, y: str) -> tuple[list | None, list | None]:
    """[below, above] error-bar lengths of points `f` from their error bands: x from each answer's tok/s/user
    interval, y from its throughput band in percent (tok/s total and per MW scale with tok/s per chip); None where
    the rows carry none."""
    xerr = yerr = None
    if {"tok_s_user_low", "tok_s_user_high"} <= set(f.columns):
        xerr = [(f["tok_s_user"] - f["tok_s_user_low"]).fillna(0).tolist(),
                (f["tok_s_user_high"] - f["tok_s_user"]).fillna(0).tolist()]
    if "tok_s_per_chip_band_pct" in f:
        b = (f["tok_s_per_chip_band_pct"].astype(float) / 100).fillna(0)
        ends = [band_interval(v, x) for v, x in zip(f[y], b, strict=True)]
        yerr = [[v - lo for v, (lo, _) in zip(f[y], ends, strict=True)],
                [hi - v for v, (_, hi) in zip(f[y], ends, strict=True)]]
    return xerr, yerr


def aa_png(points: pd.DataFrame, path: str | Path) -> Path:
    """AA median output speed per context and system, its whiskers the cost path's error band (P5-P95 where the
    points carry none: one user's requests are alike, so that spread is nearly nil), with published figures as
    marks."""
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    for _system, g in points.groupby("system", sort=True):
        g = g.sort_values("context")
        banded = {"tok_s_user_low", "tok_s_user_high"} <= set(g.columns) and g["tok_s_user_low"].notna().all()
        lo_col, hi_col, what = (("tok_s_user_low", "tok_s_user_high", "error band") if banded
                                else ("speed_p5", "speed_p95", "P5-P95"))
        lo = g["speed_median"] - g[lo_col]
        hi = g[hi_col] - g["speed_median"]
        ax.errorbar(g["context"], g["speed_median"], yerr=[lo, hi], marker="o", capsize=4,
                    label=f"{g['hardware'].iloc[0]} (simulated median, {what})")
    pub = points.dropna(subset=["published"]) if "published" in points else points.iloc[0:0]
    if len(pub):
        ax.scatter(pub["context"], pub["published"], marker="*", s=160, color="black", zorder=5,
                   label="published (Artificial Analysis)")
    ax.set_xscale("log")
    ax.set_xlabel("input context (o200k tokens)")
    ax.set_ylabel("output tok/s per user (o200k)")
    ax.set_title("Artificial Analysis method, concurrency 1")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, Path(path))
