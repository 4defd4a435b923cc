"""The tour end to end on a small config, and the report it writes (deterministic, self-contained).

The hardware backends are replaced by the test double of tests/analytic_double.py so that this test checks
the tour and report machinery whatever state the LPX/GPU backends are in; the heavy test runs the real tour.
"""

from __future__ import annotations

import re
from functools import cache

import pandas as pd
import pytest

from lpxsim.report.tour import run_tour
from lpxsim.report.tour_sections import TourConfig

SMALL = TourConfig(contexts=(10_000, 100_000), sweep_contexts=(10_000, 100_000), concurrency=(1, 8),
                   requests=3, osl=256, modes_contexts=(10_000,), modes_loads=("light",), modes_osl=64)


@cache
def analytic_step(model: str, system: str, weights: str = "fp8", kv: str = "bf16", **workload):
    """The roofline stand-in; it has no layout search, so the workload a deployment is sized for is moot."""
    from analytic_double import AnalyticHardware, AnalyticStepModel
    from lpxsim.catalog import get_model, get_system

    s = get_system(system)
    return AnalyticStepModel(get_model(model), AnalyticHardware.from_system(s), chips=s.chips_per_unit,
                             weights=weights, kv=kv, label=system)


def stand_in(mp: pytest.MonkeyPatch) -> None:
    import lpxsim.bench.backends as be
    from analytic_double import use_double

    mp.setattr(be, "step_model", analytic_step)
    use_double(mp)  # the engine's deployments (sweep, AA, modes' single systems) and the modes section's fleets


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    out = tmp_path_factory.mktemp("tour")
    with pytest.MonkeyPatch.context() as mp:
        stand_in(mp)
        res = run_tour(SMALL, out)
    return res


def test_tour_writes_report_pngs_and_parquet(tour):
    assert tour.index_html.is_file() and tour.results_parquet.is_file()
    assert {p.name for p in tour.pngs} >= {"frontier.png", "frontier_per_mw.png"}
    assert tour.statuses["capacity"] == "ok" and tour.statuses["aa"] == "ok" and tour.statuses["sweep"] == "ok"
    assert tour.statuses["moe"] == "ok" and not tour.failed
    df = pd.read_parquet(tour.results_parquet)
    assert {"capacity", "aa_gemma-4-31b", "sweep", "moe_capacity", "dense_vs_moe"} <= set(df["table"])
    sweep = df[df["table"] == "sweep"]
    assert sweep[["context", "concurrency", "hardware"]].notna().all().all()


def test_report_is_self_contained(tour):
    html = tour.index_html.read_text()
    assert "plotly" in html and len(html) > 3_000_000  # plotly.js inlined, not fetched
    assert not re.search(r'<script[^>]+src=', html)
    body = html.split("</head>", 1)[1]  # the head is plotly.js itself (it mentions URLs it never loads here)
    assert not re.search(r'(src|href)="https?://', body)  # nothing loaded from the network
    assert html.count('class="chart"') >= 5


def test_summary_puts_batch1_next_to_the_ceiling(tour):
    html = tour.index_html.read_text()
    assert "streams the replica runs (its ceiling: KV or batch cap)" in html and "tok/s/user @ concurrency 1 (AA median)" in html
    assert "streams that fit one unit (capacity model)" in html
    assert "hardware @ ceiling (deployment for this context)" in html  # the ceiling speeds name their hardware
    assert "3,382" in html and "3,431" in html  # published figures, comparison column
    assert any("ceiling lpx @ 100,000" in s for s in tour.summary)


def test_modes_section_compares_every_mode(tour):
    assert tour.statuses["modes"] == "ok"
    df = pd.read_parquet(tour.results_parquet)
    modes = df[df["table"] == "modes"]
    assert set(modes["mode"]) == {"rubin-alone", "lpx-alone", "rubin-lpx-pd", "rubin-lpx-afd", "rubin-lpx-drafter"}
    assert modes[["context", "users", "hardware", "tok_s_user_p50", "tok_s_user_p10", "ttft_p90_s",
                  "tok_s_per_mw", "speed_vs_rubin", "speed_vs_lpx"]].notna().all().all()
    assert (modes.loc[modes["mode"] == "rubin-alone", "speed_vs_rubin"] == 1.0).all()


def test_economics_and_moe_long_context_come_from_rows_the_tour_has(tour):
    """The cost table prices the sweep's and modes' rows (placed after the modes); the MoE line at 100K
    names racks, streams and tok/s per user."""
    assert tour.statuses["economics"] == "ok"
    assert list(tour.statuses).index("economics") == list(tour.statuses).index("modes") + 1
    df = pd.read_parquet(tour.results_parquet)
    econ, sweep = df[df["table"] == "economics"], df[df["table"] == "sweep"]
    assert {"lpx", "vr-nvl72", "rubin-lpx-pd", "rubin-lpx-afd"} <= set(econ["system / mode"])
    assert econ[["context", "concurrency", "hardware", "power_kw", "tok_s_user", "usd_per_mtok_output"]].notna().all().all()
    has_lpx = econ["hardware"].str.contains("lpx")
    assert econ["revenue_usd_per_hour"].notna().tolist() == has_lpx.tolist()  # priced only where a source applies
    one = econ[(econ["system / mode"] == "lpx") & (econ["context"] == 10_000) & (econ["concurrency"] == 1)]
    same = sweep[(sweep["target"] == "lpx") & (sweep["context"] == 10_000) & (sweep["concurrency"] == 1)]
    assert one["tok_s_user"].iloc[0] == same["tok_s_user"].iloc[0]  # the sweep's own figure, not a new run
    moe = df[df["table"] == "moe_long_context"].iloc[0]
    assert moe["context"] == max(SMALL.contexts) and moe["racks_for_weights_and_one_stream"] >= 1
    assert moe["streams_that_fit (capacity model)"] >= 1 and moe["tok_s_user"] > 0
    assert any(s.startswith("MoE gpt-oss-120b on LPX @ 100,000 tokens") for s in tour.summary)
    assert "what a token costs and what it sells for" in tour.index_html.read_text()


def test_moe_long_context_line_is_the_deployments_decode_speed():
    """racks and streams from the capacity model; tok/s per user = 1 / the mean batch-1 decode step over the
    answer on the engine's deployment for the workload (the one `estimate` answers on)."""
    from lpxsim.engine.deployment import Precision, place
    from lpxsim.engine.query import Workload
    from lpxsim.plan.capacity import capacity
    from lpxsim.report.tour_sections import moe_long_context_rows
    from lpxsim.step.protocol import DecodeBatch

    ctx, osl = 100_000, SMALL.osl
    with pytest.MonkeyPatch.context() as mp:
        stand_in(mp)
        res = moe_long_context_rows(SMALL)
        placed = place(SMALL.moe_model, "lpx", Workload(ctx, osl), None, Precision(SMALL.weights, SMALL.kv))
    step = placed.step
    row = res.tables["moe_long_context"].iloc[0]
    tpot = (step.decode_step(DecodeBatch((ctx,))).latency_s + step.decode_step(DecodeBatch((ctx + osl - 1,))).latency_s) / 2
    assert row["tok_s_user"] == pytest.approx(1 / tpot)
    cap = capacity(SMALL.moe_model, "lpx", ctx + osl, weights=SMALL.weights, kv=SMALL.kv)
    assert row["racks_for_weights_and_one_stream"] == max(1, cap.units_needed)
    per = min(int(step.kv_capacity_bytes() // step.kv_bytes(ctx + osl)), step.max_batch())
    assert row["streams_the_deployment_runs"] == per * placed.deployment.replicas
    assert "tok/s/user at concurrency 1" in res.summary[0] and "runs" in res.summary[0]


def test_a_missing_backend_is_said_not_invented(tmp_path):
    from lpxsim.bench.backends import BackendUnavailable

    def gpu_missing(model, system, weights="fp8", kv="bf16", **workload):
        if system == "vr-nvl72":
            raise BackendUnavailable("system", "the backend for vr-nvl72 is not available in this build: test")
        return analytic_step(model, system, weights, kv, **workload)

    import lpxsim.backends.factory as factory
    import lpxsim.bench.backends as be
    from analytic_double import use_double

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(be, "step_model", gpu_missing)
        use_double(mp)  # the engine's deployments and the modes section's fleets: no LPX compiles
        double = factory.make_step_model

        def engine_gpu_missing(model, system, *a, **k):
            if system == "vr-nvl72":
                raise ImportError("the GPU model is not in this build (test)")
            return double(model, system, *a, **k)

        mp.setattr(factory, "make_step_model", engine_gpu_missing)
        res = run_tour(SMALL, tmp_path)
    assert res.statuses["sweep"] == "ok" and not res.failed  # the sweep runs on what is available
    assert any("vr-nvl72 is not available" in s or "not in this build" in s for s in res.summary)
    aa_rows = pd.read_parquet(res.results_parquet).query("table == 'aa_gemma-4-31b'")
    assert set(aa_rows["system"]) == {"lpx"}  # nothing invented for the missing backend
    sweep = pd.read_parquet(res.results_parquet).query("table == 'sweep'")
    assert set(sweep["target"]) == {"lpx"}


def test_tour_is_deterministic(tour, tmp_path):
    with pytest.MonkeyPatch.context() as mp:
        stand_in(mp)
        again = run_tour(SMALL, tmp_path)
    assert again.index_html.read_bytes() == tour.index_html.read_bytes()
    pd.testing.assert_frame_equal(pd.read_parquet(again.results_parquet), pd.read_parquet(tour.results_parquet))


@pytest.mark.parametrize("jobs", [2, 3])
def test_tour_on_worker_processes_matches_the_serial_tour(tour, tmp_path, jobs):
    """--jobs 2: AA and MoE run in one worker process; --jobs 3: on two, with the sweep's (system, context)
    groups on them too; the same report either way."""
    from dataclasses import replace

    import lpxsim.report.tour as tour_mod

    pools = {}
    section = tour_mod.section

    def spy(name, cfg, out, pool=None):
        pools[name] = pool
        return section(name, cfg, out, pool)

    with pytest.MonkeyPatch.context() as mp:
        stand_in(mp)  # forked workers inherit the stand-ins
        mp.setattr(tour_mod, "section", spy)
        par = run_tour(replace(SMALL, jobs=jobs), tmp_path)
    # Only 3+ processes send the sweep to the pool: with 2 it runs here, where the modes reuse its deployment.
    assert set(pools) == {"capacity", "sweep", "ceilings", "modes", "occupancy", "assumptions"}
    assert (pools["sweep"] is None) == (jobs == 2)
    assert par.statuses == tour.statuses
    pd.testing.assert_frame_equal(pd.read_parquet(par.results_parquet), pd.read_parquet(tour.results_parquet))
    assert par.index_html.read_bytes() == tour.index_html.read_bytes()


def test_the_sections_ask_about_the_same_contexts_and_output_length():
    """By default the sweep and the modes run at the AA contexts and one OSL (one LPX deployment per context,
    shared through the step cache); each stays settable on its own."""
    cfg = TourConfig()
    assert cfg.sweep_contexts == cfg.modes_contexts == cfg.contexts == (10_000, 100_000)
    assert cfg.modes_osl == cfg.osl == 256
    own = TourConfig(contexts=(8_000,), osl=512)
    assert own.sweep_contexts == own.modes_contexts == (8_000,) and own.modes_osl == 512
    assert SMALL.modes_contexts == (10_000,) and SMALL.modes_osl == 64
    # The report says the sweep's LPX deployment is the modes' only where it is (same context and OSL).
    from lpxsim.report.tour_sections import shared_contexts, shared_note

    assert shared_contexts(cfg) == (10_000, 100_000) and "10,000, 100,000 tokens" in shared_note(cfg, "x")
    assert shared_contexts(SMALL) == () and shared_note(SMALL, "x") == ""
    assert shared_contexts(TourConfig(modes_contexts=(100_000, 32_000))) == (100_000,)


def test_a_dead_worker_is_a_failed_section_not_a_crash(tmp_path):
    """A worker killed mid-section (e.g. for memory) is reported in the report; the tour exits non-zero."""
    import os
    from dataclasses import replace

    import lpxsim.report.tour as tour_mod

    def dies(name, cfg, out):
        os._exit(3)

    with pytest.MonkeyPatch.context() as mp:
        stand_in(mp)
        mp.setattr(tour_mod, "_timed", dies)  # forked workers run this one
        res = run_tour(replace(SMALL, jobs=2), tmp_path)
    assert res.failed and res.statuses["moe"] == "error" and res.statuses["capacity"] == "ok"
    assert res.index_html.is_file() and "failed" in res.index_html.read_text()


def test_first_screen_gives_both_ceilings_for_each_system_and_context(tour):
    """Issue 27 item 8: sessions held and streams decoding for LPX and Rubin at each context, with the memory
    breakdown, the deployment and the session shape; the rows are session_ceilings' answer as it comes."""
    from lpxsim.plan.session_capacity import agent_shape, session_ceilings

    df = pd.read_parquet(tour.results_parquet)
    ceil = df[df["table"] == "session_ceilings"]
    assert {(s, int(c)) for s, c in zip(ceil["system"], ceil["context"], strict=True)} == {
        (s, c) for s in SMALL.systems for c in SMALL.contexts}
    from lpxsim.engine.answer import ceiling_for
    from lpxsim.engine.deployment import place
    from lpxsim.engine.query import Workload

    for r in ceil.itertuples():
        assert r.sessions_held_spread >= r.sessions_held_last_turn >= 1
        assert 0 < r.streams_decoding_mean <= r.sessions_held
        shape = agent_shape(int(r.context), SMALL.osl)
        again = session_ceilings(SMALL.model, r.system, shape, SMALL.osl, chips=int(r.chips), turn_s=r.turn_s)
        assert r.sessions_held_spread == again.sessions_held and r.session == again.shape_label()
        # the headline is the engine's own ceiling (the audit: the first screen said 42 where the sweep ran 22)
        with pytest.MonkeyPatch.context() as mp:
            stand_in(mp)  # the backends the tour ran on
            placed = place(SMALL.model, r.system, Workload(int(r.context), SMALL.osl))
            held = ceiling_for(placed.step, Workload(int(r.context), SMALL.osl, shape)) * placed.deployment.replicas
        assert r.sessions_held == held
        assert r.weights_gb + r.reserve_gb + r.kv_gb + r.free_gb == pytest.approx(r.total_gb)
    html = tour.index_html.read_text()
    first = html.split("<section", 2)[1]  # the first screen
    for words in ("sessions held (KV resident)", "streams decoding (mean)", "KV per session", "session shape",
                  "Agent sessions growing to 100,000 tokens"):
        assert words in first


def test_occupancy_section_draws_resident_sessions_and_kv_per_retention_policy(tour):
    df = pd.read_parquet(tour.results_parquet)
    ret = df[df["table"] == "retention"]
    assert list(ret["policy"]) == ["hold", "evict_idle", "lru"]
    assert (ret["prefix_hit_rate"].between(0, 1)).all() and (ret["sessions_resident_max"] >= 1).all()
    assert (ret["turns_incomplete"] == 0).all()  # every turn runs under every policy
    tl = df[df["table"] == "occupancy_timeline"]
    assert set(tl["policy"]) == {"hold", "evict_idle", "lru"}
    assert tl["kv_occupancy"].between(0, 1.0 + 1e-9).all() and tl["sessions_resident"].max() >= 1
    html = tour.index_html.read_text()
    assert "retention policies side by side" in html and "KV occupancy" in html


def test_sweep_rows_carry_their_answers_band_and_the_chart_shades_it(tour):
    """Issue 28 item 8: each sweep row carries the engine answer's band; the report draws it and the first
    screen's table shows it."""
    from lpxsim.engine.bands import band_for
    from lpxsim.report.charts import speed_band_chart

    df = pd.read_parquet(tour.results_parquet)
    sw = df[(df["table"] == "sweep") & df["fits"].astype(bool)]
    assert len(sw) and sw["band"].notna().all()
    for r in sw.itertuples():
        b = band_for(r.cost_path)
        assert (r.tok_s_user_low, r.tok_s_user_high) == pytest.approx(b.interval(r.tok_s_user))
    fills = [t for t in speed_band_chart(sw).data if t.fill == "toself"]
    assert len(fills) == sw.groupby(["target", "context"]).ngroups  # one shaded band per curve
    assert all(t.mode == "lines" for t in fills)  # no markers: plotly drew stray dots on a band of < 20 points
    html = tour.index_html.read_text()
    assert "with each answer&#x27;s error band" in html or "with each answer's error band" in html
    first = html.split("<section", 2)[1]
    assert "compiled-lpx" in first  # the planner's table has its band column
