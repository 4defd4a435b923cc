"""The sweep's frontier is the Pareto set over layouts: LPX is drawn on the rack and on each smaller replica size
of the layout search tiled over it, and a size is priced only where it can reach the frontier (`bench.screen`).

The fast cases run the screen's logic on stand-in answers and the whole sweep on the test double
(tests/analytic_double.py); the heavy case runs Gemma 4 31B's compiled LPX deployments at 10K tokens.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lpxsim.bench import screen
from lpxsim.bench.store import PointStore
from lpxsim.bench.sweep import grid, run_sweep
from lpxsim.engine.pareto import dominates

CONCURRENCY = (1, 2, 4, 8, 16, 32, 64)  # the tour's


def assert_frontier_is_the_pareto_set(df: pd.DataFrame) -> None:
    """Per system and context: every frontier point is beaten by no row, every other answered row by one."""
    fit = df[df["fits"].astype(bool)].dropna(subset=["tok_s_user", "tok_s_total"])
    for _, g in fit.groupby(["target", "context"]):
        pts = list(zip(g["tok_s_user"], g["tok_s_total"], strict=True))
        for on, p in zip(g["on_frontier"].astype(bool), pts, strict=True):
            beaten = any(dominates(q, p) for q in pts)
            assert beaten != on, (p, on)


def _row(u: float, t: float, c: int, power_kw: float = 100.0) -> dict:
    return {"fits": True, "tok_s_user": u, "tok_s_total": t, "power_kw": power_kw, "concurrency": c}


def test_a_bound_is_beaten_only_on_both_frontiers() -> None:
    corner = screen.Bound(tok_s_user=100.0, tok_s_total=50.0, power_w=100e3, hardware="x")
    assert corner.beaten_by(_row(120.0, 60.0, 8))
    assert not corner.beaten_by(_row(90.0, 600.0, 8))  # more aggregate, slower per user: the size may win
    assert not corner.beaten_by(_row(120.0, 60.0, 8, power_kw=200.0))  # beaten on tok/s, not per MW
    assert not corner.beaten_by({**_row(120.0, 60.0, 8), "fits": False})
    assert not corner.beaten_by(_row(math.nan, 60.0, 8))


def test_the_screen_prices_the_sizes_the_rack_does_not_beat(tmp_path, monkeypatch) -> None:
    """Sizes are screened against the rack's answers at the same context, which are answered once and stored."""
    pts = [{"model": "m", "target": "lpx", "context": 10_000, "concurrency": c, **size}
           for size in ({}, {"replica_chips": 80}, {"replica_chips": 160}) for c in (1, 0)]
    rack = {1: _row(100.0, 10.0, 1), 0: _row(100.0, 400.0, 40)}
    asked = []

    def evaluate(p):
        asked.append(p)
        return rack[p["concurrency"]]

    bounds = {80: screen.Bound(120.0, 30.0, 100e3, "3 x 80"), 160: screen.Bound(90.0, 300.0, 100e3, "1 x 160")}
    monkeypatch.setattr(screen, "size_bound", lambda p: bounds[p["replica_chips"]])
    store = PointStore(tmp_path)
    kept, dropped = screen.screen_sizes(pts, store, evaluate)
    assert [p.get("replica_chips") for p in kept] == [None, None, 80, 80]  # 80: faster per user than the rack
    assert [(d.replica_chips, d.hardware) for d in dropped] == [(160, "1 x 160")]
    assert "400 tok/s total at concurrency 40" in dropped[0].reason()
    assert all(store.has(p) for p in pts if "replica_chips" not in p) and len(asked) == 2  # answered once
    screen.screen_sizes(pts, store, evaluate)
    assert len(asked) == 2  # a rerun reads the stored answers


def test_the_screen_changes_no_frontier_on_the_double(tmp_path, monkeypatch) -> None:
    """The whole sweep on the test double at both tour contexts: every size the screen skips is off the frontier
    the unscreened sweep draws, and the frontier (the Pareto set over every deployment) is the same."""
    from analytic_double import use_double

    use_double(monkeypatch)
    pts = grid("gemma-4-31b", ["lpx"], [10_000, 100_000], CONCURRENCY, deployments="all")
    every = run_sweep(pts, tmp_path / "all", executor="serial", progress=False, screen=False)
    screened = run_sweep(pts, tmp_path / "picks", executor="serial", progress=False)
    assert every["replica_chips"].notna().any() and screened.attrs["screened"]
    assert_frontier_is_the_pareto_set(every)
    assert_frontier_is_the_pareto_set(screened)
    on = ["context", "concurrency", "hardware", "tok_s_user", "tok_s_total"]
    front = every[every["on_frontier"]][on].reset_index(drop=True)
    assert front.equals(screened[screened["on_frontier"]][on].reset_index(drop=True))
    sizes = screened["replica_chips"] if "replica_chips" in screened else pd.Series(math.nan, screened.index)
    kept = set(zip(screened["context"], sizes.fillna(0), strict=True))
    skipped = every[[(c, r) not in kept for c, r in zip(every["context"], every["replica_chips"].fillna(0),
                                                         strict=True)]]
    assert len(skipped) and not skipped["on_frontier"].any()


@pytest.mark.heavy
def test_lpx_frontier_holds_the_layouts_the_search_finds(tmp_path) -> None:
    """Gemma 4 31B on LPX at 10K (the tour's workload): the layout search finds several replica sizes
    non-dominated, and the sweep's frontier holds more than one LPX deployment, each point beaten by no row;
    the sizes the screen skipped are off the frontier of the unscreened sweep."""
    from lpxsim.catalog import get_model
    from lpxsim.engine.query import session_for
    from lpxsim.engine.search import operating_point

    pts = grid("gemma-4-31b", ["lpx"], [10_000], CONCURRENCY)
    df = run_sweep(pts, tmp_path / "picks", executor="serial", progress=False)
    assert_frontier_is_the_pareto_set(df)
    front = df[df["on_frontier"].astype(bool)]
    assert front["hardware"].nunique() >= 2, front[["hardware", "concurrency", "tok_s_user", "tok_s_total"]]
    assert front["replica_chips"].notna().any() and front["replica_chips"].isna().any()  # a size and the rack

    op = operating_point(get_model("gemma-4-31b"), "lpx", 10_000, 256, 1.0,
                         session=session_for("agentic", 10_000, 256))
    assert len({p.chips for p in op.pareto}) >= 2  # the search finds two sizes non-dominated here

    every = run_sweep(pts, tmp_path / "all", executor="serial", progress=False, screen=False)
    assert_frontier_is_the_pareto_set(every)
    skipped = set(every["replica_chips"].dropna()) - set(df["replica_chips"].dropna())
    assert len(skipped) == len(df.attrs["screened"])  # each skipped size is named with its reason
    assert not every[every["replica_chips"].isin(skipped)]["on_frontier"].any()
    same = ["concurrency", "hardware", "tok_s_user", "tok_s_total"]
    assert every[every["on_frontier"]][same].reset_index(drop=True).equals(front[same].reset_index(drop=True))
