"""Issue 30 item 4: the page reads for a planner: racks and chips, human headers, the planner's columns,
a band column only when a result carries a band."""

from __future__ import annotations

import pandas as pd
import pytest

from lpxsim.report.columns import MAX_SHOWN, human_header, planner_columns
from lpxsim.report.hardware_text import NBSP, hardware_words
from lpxsim.report.html import Table, table_html
from lpxsim.report.summary import planner_rows


@pytest.mark.parametrize("label, words", [
    ("32 vr-nvl72 + 256 lpx, 186 kW", f"1 Rubin rack (32 of 72 GPUs) + 1 LPX rack, 186{NBSP}kW"),
    ("32 vr-nvl72 + 128 lpx, 137 kW", f"1 Rubin rack (32 of 72 GPUs) + 1 LPX rack (128 of 256 LPUs), 137{NBSP}kW"),
    ("512 lpx, 194 kW", f"2 LPX racks, 194{NBSP}kW"),
    ("gemma-4-31b on lpx (tp=16,stages=8,kvsplit=4,replicas=1): 128 chips, 48.5 kW",
     f"1 LPX rack (128 of 256 LPUs), 48{NBSP}kW"),
    ("vr-nvl72 TP4 x18 fp8: 72 chips, 199.8 kW", f"1 Rubin rack, 200{NBSP}kW"),
    ("h200-hgx: 4 chips, 5.1 kW", f"1 H200 node (4 of 8 GPUs), 5.1{NBSP}kW"),
    ("256 x LP30, 97 kW", f"1 LPX rack, 97{NBSP}kW"),
    ("a fleet of things", "a fleet of things"),  # not recognised: unchanged, never a guess
])
def test_hardware_reads_in_racks_and_chips(label, words):
    assert hardware_words(label) == words


def test_headers_are_words_with_units():
    assert human_header("tok_s_user") == "tok/s per user"
    assert human_header("ttft_p90_s") == "TTFT P90 (s)"
    assert human_header("kv_per_stream_gb") == "KV per user (GB)"
    assert human_header("new_thing_kw") == "new thing (kW)"  # an unknown name still gets its unit spelled out
    assert human_header("already human (GB)") == "already human (GB)"


def test_a_wide_table_shows_the_planner_columns_and_points_to_the_download():
    df = pd.DataFrame([{f"extra_{i}": i for i in range(12)} | {"system": "lpx", "context": 10_000,
                                                                "tok_s_user": 100.0, "hardware": "512 lpx, 194 kW"}])
    shown = planner_columns(df)
    assert len(shown) == MAX_SHOWN and {"system", "context", "tok_s_user", "hardware"} <= set(shown)
    html = table_html(Table(df))
    assert "more columns in the full data (results.csv, results.parquet)" in html
    assert ">2 LPX racks, 194" in html and "snake" not in html and ">tok/s per user<" in html


def _econ(band: str | None) -> pd.DataFrame:
    row = {"source": "sweep: KV ceiling", "system / mode": "lpx", "context": 10_000, "concurrency": 40,
           "hardware": "lpx: 256 chips, 97.0 kW", "power_kw": 97.0, "tok_s_user": 1000.0, "tok_s_output": 40_000.0,
           "usd_per_mtok_output": 0.8}
    if band is not None:
        row["band"] = band
    return pd.DataFrame([row])


def test_the_band_column_shows_only_when_a_result_carries_one():
    assert "band" not in planner_rows(_econ(None), None, 256, 256).columns
    with_band = planner_rows(_econ("±12 %"), None, 256, 256)
    assert with_band["band"].tolist() == ["±12 %"]
    row = planner_rows(_econ(None), None, 256, 256).iloc[0]
    assert row["deployment"] == "1 LPX rack" and row["OSL (tokens)"] == 256 and row["concurrent users"] == 40
    assert row["output tok/s per MW (IT)"] == pytest.approx(40_000 / 0.097)
