"""A real browser: headless Chromium opens the tour's index.html; the charts must render without script errors."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from browser_gate import chromium_or_skip
from lpxsim.report.browser import capture
from lpxsim.report.tour import run_tour


@pytest.fixture(autouse=True, scope="module")
def _chromium():
    """Skip without Chromium on a developer machine; fail where CI requires it (browser_gate)."""
    chromium_or_skip()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from test_tour_report import SMALL, stand_in

    out = tmp_path_factory.mktemp("browser")
    with pytest.MonkeyPatch.context() as mp:
        stand_in(mp)
        res = run_tour(SMALL, out)
    return res.index_html


def test_charts_render_without_script_errors(report, tmp_path):
    shot = tmp_path / "report.png"
    cap = capture(report, shot, size=(1400, 2400))
    charts = report.read_text().count('class="chart"')
    assert charts >= 5
    assert cap.count('class="main-svg"') >= charts  # plotly drew an SVG for every chart
    assert cap.script_errors == []
    assert cap.console == []  # the report logs nothing at all
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert img.shape == (2400, 1400)
    assert img.std() > 20  # not a blank page
    shutil.copy(shot, report.parent / "screenshot.png")  # kept next to the report for a person to look at


def test_harness_sees_script_errors(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><p>x</p><script>notDefinedAnywhere();</script></body></html>")
    cap = capture(bad, tmp_path / "bad.png", size=(400, 300))
    assert any("notDefinedAnywhere" in e for e in cap.script_errors)
    assert cap.count('class="main-svg"') == 0
