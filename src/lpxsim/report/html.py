"""One self-contained HTML report: plotly.js inlined once, charts, tables, notes. No network needed.

A report is a list of `Section`s, each a list of blocks: `Table` (a DataFrame),
`Chart` (a plotly figure), `Note` (plain text, escaped) or `Image` (a PNG,
embedded as a data URI). Element ids are derived from positions, so the same
inputs give the same file byte for byte.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from lpxsim.bench.store import atomic_write_text


@dataclass
class Table:
    """A DataFrame shown with human headers; `columns` (raw names) picks what a planner reads, else the
    planner columns are chosen by `planner_columns`. The whole frame is in the report's CSV/parquet download."""

    df: pd.DataFrame
    caption: str = ""
    css: str = ""
    columns: tuple[str, ...] | None = None


@dataclass
class Chart:
    figure: Any  # plotly.graph_objects.Figure
    caption: str = ""


@dataclass
class Note:
    text: str
    kind: str = "info"  # info | warn | error


@dataclass
class Image:
    path: Path
    caption: str = ""


@dataclass
class Section:
    title: str
    intro: str = ""
    blocks: list[Any] = field(default_factory=list)

    def add(self, block: Any) -> Section:
        self.blocks.append(block)
        return self


CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#111827;color:#fff;padding:22px 36px}
header h1{margin:0 0 6px 0;font-size:24px} header p{margin:0;color:#cbd5e1;font-size:14px}
nav{padding:10px 36px;background:#e5e7eb;font-size:13px;line-height:1.8} nav a{margin-right:14px;color:#1f4fa3;white-space:nowrap}
main{padding:8px 36px 40px 36px;max-width:1280px;box-sizing:border-box}
section{background:#fff;border-radius:8px;box-shadow:0 1px 3px rgba(0,0,0,.08);margin:18px 0;padding:16px 22px}
h2{font-size:19px;margin:4px 0 10px 0;color:#0f172a}
p.intro{color:#374151;font-size:14px;line-height:1.45}
table{border-collapse:collapse;font-size:12.5px;margin:8px 0 14px 0}
th{background:#f1f5f9;text-align:right;padding:5px 9px;border-bottom:2px solid #cbd5e1;white-space:normal;
vertical-align:bottom;min-width:48px;max-width:150px;overflow-wrap:normal;word-break:normal;hyphens:none}
td{padding:4px 9px;border-bottom:1px solid #e5e7eb;text-align:right;white-space:nowrap}
td.t,th.t{text-align:left} td.t{white-space:normal;overflow-wrap:normal} td.w{min-width:160px;max-width:420px}
td.id{white-space:nowrap}
.tw{max-width:100%} .tw table{width:100%}
.downloads{font-size:13px;margin:6px 0 0 0} .downloads a{color:#93c5fd;margin-right:12px}
.lead{font-size:15px;line-height:1.5;color:#111827;margin:6px 0} .more{font-size:12px;color:#64748b;margin:-8px 0 12px 0}
.headline td{font-size:13.5px} .headline th{white-space:normal;max-width:120px;vertical-align:bottom}
caption{caption-side:top;text-align:left;font-weight:600;padding:4px 0;color:#334155}
.note{padding:8px 12px;border-left:4px solid #3b82f6;background:#eff6ff;font-size:13.5px;margin:8px 0}
.note.warn{border-color:#f59e0b;background:#fffbeb} .note.error{border-color:#dc2626;background:#fef2f2}
.chart{margin:8px 0 16px 0} figure{margin:8px 0} figcaption{font-size:12.5px;color:#475569}
img{max-width:100%}
"""


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        if v != v:  # NaN
            return "-"
        if abs(v) >= 100 or v == 0:
            return f"{v:,.0f}"
        return f"{v:,.3g}" if abs(v) < 1 else f"{v:,.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return "-" if v is None else str(v)


def _col_class(series: pd.Series) -> str:
    """'' for numbers (right-aligned), 't id' for names (one word each: never broken, not even at a
    hyphen), 't' for short text, 't w' for long text that may wrap at its spaces."""
    if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
        return ""
    texts = [str(v) for v in series]
    longest = max((len(t) for t in texts), default=0)
    if longest <= 28 and not any(" " in t for t in texts):
        return "t id"
    return "t w" if longest > 40 else "t"


# Columns a reader needs first, in this order, wherever a table has them (then the rest as given).
KEY_COLUMNS = ("mode", "system", "target", "context", "load", "users", "concurrency", "tok_s_user_p50",
               "tok_s_user_p10", "tok_s_user", "ttft_p90_s", "ttft_s", "tok_s_per_mw")


def key_columns_first(df: pd.DataFrame) -> pd.DataFrame:
    """The key columns (KEY_COLUMNS present) first, the others after them in their own order."""
    first = [c for c in KEY_COLUMNS if c in df.columns]
    return df[first + [c for c in df.columns if c not in first]]


def table_html(t: Table) -> str:
    """A table with human headers (`human_header`), the planner's columns, hardware in racks and chips;
    headers and text wrap at spaces, numbers never."""
    from lpxsim.report.columns import human_header, planner_columns

    df = t.df if t.css == "headline" else key_columns_first(t.df)
    shown = list(t.columns) if t.columns is not None else planner_columns(df, keep_all=t.css == "headline")
    shown = [c for c in shown if c in df.columns]
    view = df[shown]
    hardware = [c for c in view.columns if str(c).startswith("hardware")]
    if hardware:
        from lpxsim.report.hardware_text import hardware_words

        view = view.assign(**{c: view[c].map(hardware_words) for c in hardware})
    classes = [_col_class(view[c]) for c in view.columns]
    head = "".join(f'<th class="{k}">{html.escape(human_header(str(c)))}</th>'
                   for c, k in zip(view.columns, classes, strict=True))
    rows = "".join(
        "<tr>" + "".join(f'<td class="{k}">{html.escape(_fmt(v))}</td>' for v, k in zip(r, classes, strict=True))
        + "</tr>"
        for r in view.itertuples(index=False, name=None)
    )
    cap = f"<caption>{html.escape(t.caption)}</caption>" if t.caption else ""
    css = f' class="{html.escape(t.css)}"' if t.css else ""
    hidden = len(df.columns) - len(shown)
    more = (f'<p class="more">{hidden} more column{"s" if hidden > 1 else ""} in the full data '
            f'(results.csv, results.parquet)</p>' if hidden > 0 else "")
    return (f'<div class="tw"><table{css}>{cap}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'
            f"{more}")


def _block_html(b: Any, ident: str) -> str:
    if isinstance(b, Table):
        return table_html(b)
    if isinstance(b, Note):
        if b.kind == "lead":  # the first screen's sentences: plain text, no box
            return f'<p class="lead">{html.escape(b.text)}</p>'
        return f'<div class="note {html.escape(b.kind)}">{html.escape(b.text)}</div>'
    if isinstance(b, Chart):
        import plotly.graph_objects as go

        # Rebuilt from its dict: one key order whether the figure was made here or unpickled from a worker.
        div = go.Figure(b.figure.to_dict()).to_html(full_html=False, include_plotlyjs=False, div_id=ident,
                                                    config={"displaylogo": False, "responsive": True})
        cap = f"<figcaption>{html.escape(b.caption)}</figcaption>" if b.caption else ""
        return f'<div class="chart">{div}{cap}</div>'
    if isinstance(b, Image):
        data = base64.b64encode(Path(b.path).read_bytes()).decode()
        cap = f"<figcaption>{html.escape(b.caption)}</figcaption>" if b.caption else ""
        return f'<figure><img alt="{html.escape(b.caption)}" src="data:image/png;base64,{data}">{cap}</figure>'
    raise TypeError(f"unknown report block {type(b).__name__}")


def render(title: str, subtitle: str, sections: list[Section], downloads: tuple[str, ...] = ()) -> str:
    """The full HTML document as a string (plotly.js inlined in the head); `downloads` are files beside the
    HTML (the full data), linked under the title."""
    from plotly.offline import get_plotlyjs

    links = " ".join(f'<a href="{html.escape(d)}" download>{html.escape(d)}</a>' for d in downloads)
    down = f'<p class="downloads">Full data: {links}</p>' if links else ""
    nav = " ".join(f'<a href="#s{i}">{html.escape(s.title)}</a>' for i, s in enumerate(sections))  # wraps
    body = []
    for i, s in enumerate(sections):
        blocks = "".join(_block_html(b, f"chart-{i}-{j}") for j, b in enumerate(s.blocks))
        intro = f'<p class="intro">{html.escape(s.intro)}</p>' if s.intro else ""
        body.append(f'<section id="s{i}"><h2>{html.escape(s.title)}</h2>{intro}{blocks}</section>')
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{CSS}</style>"
        f"<script type=\"text/javascript\">{get_plotlyjs()}</script></head><body>"
        f"<header><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p>{down}</header>"
        f"<nav>{nav}</nav><main>{''.join(body)}</main></body></html>\n"
    )


def write_report(path: str | Path, title: str, subtitle: str, sections: list[Section],
                 downloads: tuple[str, ...] = ()) -> Path:
    """Render and write atomically (temporary name, then rename)."""
    p = Path(path)
    atomic_write_text(p, render(title, subtitle, sections, downloads))
    return p
