"""Report fixes (issue 12): key columns first, tables wrap instead of clipping, no line across a gap in
concurrency, bar labels one per row (no overlap)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lpxsim.report.charts import bars_chart, frontier_chart
from lpxsim.report.html import Table, key_columns_first, table_html


def test_key_columns_come_first() -> None:
    df = pd.DataFrame({"hardware": ["a"], "fleet_tok_s": [1.0], "tok_s_user_p50": [2.0], "context": [10],
                       "mode": ["m"]})
    assert list(key_columns_first(df).columns) == ["mode", "context", "tok_s_user_p50", "hardware", "fleet_tok_s"]
    html = table_html(Table(df))
    assert html.index(">serving mode<") < html.index(">context (tokens)<") < html.index(">hardware<")


def test_a_missing_concurrency_breaks_the_line() -> None:
    rows = [dict(target="lpx", context=1000, concurrency=c, tok_s_user=100.0 / c, tok_s_total=100.0 * c,
                 fits=c != 4, hardware="1 lpx rack") for c in (1, 2, 4, 8)]
    fig = frontier_chart(pd.DataFrame(rows))
    (trace,) = fig.data
    xs = list(trace.x)
    assert len(xs) == 4 and (xs[2] is None or (isinstance(xs[2], float) and math.isnan(xs[2])))
    assert trace.connectgaps is False


def test_bar_labels_get_one_row_each() -> None:
    df = pd.DataFrame({"label": ["rubin-alone<br>72 vr-nvl72, 200 kW", "lpx-alone<br>256 lpx, 97 kW"],
                       "a": [1.0, 2.0], "b": [3.0, 4.0]})
    fig = bars_chart(df, "label", [("a", "A"), ("b", "B")], "t")
    assert all(tr.orientation == "h" for tr in fig.data)
    assert list(fig.data[0].y) == list(df["label"])[::-1]
    assert fig.layout.height >= 90 + 60 * len(df)


def test_frontier_and_bar_charts_draw_each_answers_band() -> None:
    """Issue 28, item 8: the report draws the bands on its charts. The frontier charts drew none (helper audit,
    round 3 twenty-fifth session): its Pareto points now carry whiskers from the answer's own tok/s/user
    interval (x) and throughput band (y); the modes' bars theirs."""
    rows = [dict(target="lpx", context=1000, concurrency=c, tok_s_user=100.0 / c, tok_s_total=100.0 * c, fits=True,
                 hardware="1 lpx rack", on_frontier=c != 2, tok_s_user_low=50.0 / c, tok_s_user_high=200.0 / c,
                 tok_s_per_chip_band_pct=10.0) for c in (1, 2, 4)]
    (trace,) = frontier_chart(pd.DataFrame(rows)).data
    assert list(trace.error_x.array) == [100.0, 0.0, 25.0]  # 200/c - 100/c on the Pareto set, none beside it
    assert list(trace.error_x.arrayminus) == [50.0, 0.0, 12.5]
    assert math.isclose(trace.error_y.array[2], 40.0) and math.isclose(trace.error_y.arrayminus[2], 400 - 400 / 1.1)
    bare = frontier_chart(pd.DataFrame([{k: v for k, v in r.items() if "band" not in k and "_lo" not in k
                                         and "_hi" not in k} for r in rows])).data[0]
    assert bare.error_x.array is None and bare.error_y.array is None
    df = pd.DataFrame({"label": ["a", "b"], "v": [100.0, 10.0], "v_band": [50.0, None]})
    (bar,) = bars_chart(df, "label", [("v", "V")], "t", bands={"v": "v_band"}).data
    assert list(bar.error_x.array) == [0.0, 50.0]  # bars run bottom-up: the first row is drawn last
    assert list(bar.error_x.arrayminus) == pytest.approx([0.0, 100 - 100 / 1.5])


def test_the_png_charts_draw_the_bands_too(tmp_path) -> None:
    """The static frontier PNG drew no band (round 3, twenty-fifth session); the AA PNG's whiskers were P5-P95,
    nearly nil for one user's alike requests."""
    from lpxsim.report.plots import _band_errors, aa_png, frontier_png

    f = pd.DataFrame({"tok_s_user": [100.0], "tok_s_user_low": [50.0], "tok_s_user_high": [200.0],
                      "tok_s_total": [400.0], "tok_s_per_chip_band_pct": [10.0]})
    xerr, yerr = _band_errors(f, "tok_s_total")
    assert xerr == [[50.0], [100.0]] and yerr[1] == pytest.approx([40.0]) and yerr[0] == pytest.approx([400 - 400 / 1.1])
    assert _band_errors(f[["tok_s_user", "tok_s_total"]], "tok_s_total") == (None, None)
    rows = [dict(target="lpx", context=1000, concurrency=c, tok_s_user=100.0 / c, tok_s_total=100.0 * c, fits=True,
                 hardware="1 lpx rack", on_frontier=True, tok_s_user_low=50.0 / c, tok_s_user_high=200.0 / c,
                 tok_s_per_chip_band_pct=10.0) for c in (1, 2, 4)]
    assert frontier_png(pd.DataFrame(rows), tmp_path / "f.png").stat().st_size > 0
    aa = pd.DataFrame({"system": ["lpx"] * 2, "context": [1000, 10000], "speed_median": [100.0, 90.0],
                       "speed_p5": [99.0, 89.0], "speed_p95": [101.0, 91.0], "hardware": ["1 lpx rack"] * 2,
                       "tok_s_user_low": [50.0, 45.0], "tok_s_user_high": [200.0, 180.0]})
    assert aa_png(aa, tmp_path / "aa.png").stat().st_size > 0
