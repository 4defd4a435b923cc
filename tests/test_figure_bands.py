"""Every figure an answer prints carries the band of its cost path, or says its path has none (issue 28, item 8)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from lpxsim.engine.bands import answer_band


def _estimate(*args: str) -> str:
    from lpxsim.cli.main import app

    r = CliRunner().invoke(app, ["estimate", *args])
    assert r.exit_code == 0, r.output
    return r.stdout


def test_an_estimate_bands_its_throughput_per_chip_from_its_own_path():
    args = ("llama-3.1-70b", "--system", "mi325x", "--isl", "10000", "--concurrency", "8")
    d = json.loads(_estimate(*args, "--json"))
    b = answer_band("mi325x", metric="tok_s_per_chip", layout=d["layout"])
    assert d["cost_path"] == b.path == "projected-gpu"
    assert d["tok_s_per_chip_band_pct"] == round(100 * b.band_fraction, 2)  # the cross-vendor widening included
    low, high = b.interval(d["output_tok_s_per_chip"])
    assert (d["tok_s_per_chip_low"], d["tok_s_per_chip_high"]) == (low, high)
    text = " ".join(_estimate(*args).split())
    assert f"throughput (tok/s, per chip, per MW) and $/Mtok ±{d['tok_s_per_chip_band_pct']:.0f}%" in text


def test_an_lpx_estimate_names_the_figures_its_path_has_no_validation_of():
    d = json.loads(_estimate("gemma-4-31b", "--json"))
    assert d["cost_path"] == "compiled-lpx" and "tok_s_user_band_pct" in d
    assert d["unvalidated"] == "ttft,tok_s_per_chip" and "ttft_band_pct" not in d
    text = " ".join(_estimate("gemma-4-31b").split())
    assert "TTFT, throughput (tok/s, per chip, per MW) and $/Mtok: no validation on the compiled-lpx path" in text


def test_bench_aa_carries_the_band_of_its_path_in_json_text_chart_and_report_table():
    import pandas as pd

    from lpxsim.cli.main import app
    from lpxsim.report.charts import aa_chart
    from lpxsim.report.tour_sections import _aa_view

    args = ["bench", "aa", "gemma-4-31b", "--system", "mi325x", "--contexts", "10000", "--requests", "4"]
    d = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    p = d["points"][0]
    b = answer_band("mi325x", layout=d["hardware"])  # AMD: projected, widened to its maker's cross-vendor record
    assert p["cost_path"] == b.path == "projected-gpu" and "cross-vendor" in p["band"]
    assert p["tok_s_user_band_pct"] == round(100 * b.band_fraction, 2)
    assert (p["tok_s_user_low"], p["tok_s_user_high"]) == b.interval(p["speed_median"])
    assert "ttft_band_pct" in p
    text = " ".join(CliRunner().invoke(app, args).stdout.split())
    assert "10,000 tokens, median error band: tok/s/user" in text
    df = pd.DataFrame([p])
    bar = aa_chart(df).data[0]
    assert list(bar.error_y.array) == [p["tok_s_user_high"] - p["speed_median"]]  # the whisker is the band
    assert "band" in _aa_view(df).columns


def test_plan_t8_bands_each_systems_speed_from_its_own_path():
    from lpxsim.cli.main import app

    d = json.loads(CliRunner().invoke(app, ["plan", "t8", "--json"]).stdout)
    for label, r in d["systems"].items():
        b = answer_band(r["system"], d["weights"], layout=r["layout"])
        assert r["cost_path"] == b.path and r["tok_s_user_band_pct"] == round(100 * b.band_fraction, 2), label
        shown = r["tok_s_user"] if r["feasible"] else r["best_tok_s_user"]  # the speed the table prints
        if shown > 0:
            assert (r["tok_s_user_low"], r["tok_s_user_high"]) == b.interval(shown), label
    assert {d["systems"][s]["cost_path"] for s in ("lpx", "vr-nvl72")} == {"compiled-lpx", "projected-gpu"}
    text = " ".join(CliRunner().invoke(app, ["plan", "t8"]).stdout.split())
    assert all(f"- {label} error band: tok/s/user" in text for label in d["systems"])


def test_sweep_text_prints_each_rows_band_and_its_cost_path(tmp_path):
    import pandas as pd

    from lpxsim.cli.main import app

    args = ["sweep", "gemma-4-31b", "--systems", "mi325x", "--contexts", "10000", "--concurrency", "1",
            "--no-ceiling", "--executor", "serial", "--out", str(tmp_path)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    row = pd.read_parquet(tmp_path / "sweep.parquet").iloc[0]
    assert row["cost_path"] == "projected-gpu"
    text = " ".join(r.stdout.split())
    assert f"band ±{row['tok_s_user_band_pct']:.0f}%" in text
    assert f"- mi325x: tok/s/user error band {row['band']}" in text
    assert f"TTFT ±{row['ttft_band_pct']:.0f}%; tok/s and tok/s/MW ±{row['tok_s_per_chip_band_pct']:.0f}%" in text
