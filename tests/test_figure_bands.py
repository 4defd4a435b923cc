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
    assert d["tok_s_per_chip_band_pct"] == round(100 * b.band_fraction, 1)  # the cross-vendor widening included
    low, high = b.interval(d["output_tok_s_per_chip"])
    assert (d["tok_s_per_chip_low"], d["tok_s_per_chip_high"]) == (low, high)
    text = " ".join(_estimate(*args).split())
    assert f"throughput (tok/s, per chip, per MW) ±{d['tok_s_per_chip_band_pct']:.0f}%" in text


def test_an_lpx_estimate_names_the_figures_its_path_has_no_validation_of():
    d = json.loads(_estimate("gemma-4-31b", "--json"))
    assert d["cost_path"] == "compiled-lpx" and "tok_s_user_band_pct" in d
    assert set(d["unvalidated"]) == {"ttft", "tok_s_per_chip"} and "ttft_band_pct" not in d
    text = " ".join(_estimate("gemma-4-31b").split())
    assert "TTFT, throughput (tok/s, per chip, per MW): no validation on the compiled-lpx path" in text
