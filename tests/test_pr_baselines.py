"""The judges outside the calibration set: InferenceX rows its own pull requests quote as baselines (B300,
MI325X, MI355X, H200 MTP), replayed as the calibration rows are and compared with the means they quote."""

from __future__ import annotations

import pytest

from lpxsim.engine import validation as V


@pytest.fixture(scope="module")
def judged():
    return V.pr_baselines(V.pr_baseline_rows())


def test_every_baseline_is_priced_and_grouped(judged):
    points = judged["points"]
    assert len(points) == len(V.pr_baseline_rows()) >= 30
    assert all(p["skipped"] is None and p["pred_tpot_s"] > 0 for p in points)
    groups = judged["replay"]["groups"]
    for g in ("gpu=B300", "gpu=MI325X", "gpu=MI355X", "spec=mtp k=2"):
        assert groups[g]["tpot"]["n"] >= 1
    assert groups["all"]["tpot"]["n"] == len(points)


def test_baselines_are_judged_against_the_means_they_quote(judged):
    rows = {r["point_id"]: r for r in V.pr_baseline_rows()}
    assert all(r["latency_statistic"] == "mean" and "tpot_median_s" not in r for r in rows.values())
    p = judged["points"][0]
    r = rows[p["id"]]
    assert p["tpot_s"] == float(r["tpot_mean_s"]) and p["ttft_s"] == float(r["ttft_mean_s"])
    replayed = V.replay_row(r)
    assert p["pred_tpot_s"] == pytest.approx(replayed["tpot_s"])


def test_mtp_baselines_draft_what_the_launch_script_sets():
    mtp = [r for r in V.pr_baseline_rows() if r["spec_method"] != "none"]
    assert mtp and all(r["spec_method"] == "mtp" and r["spec_draft_tokens"] == "2" for r in mtp)


def test_validate_prints_the_judges_table(judged):
    from lpxsim.cli.validate_cmd import pr_baselines_table

    text = "\n".join(pr_baselines_table(judged))
    assert "baselines quoted in InferenceX's own pull requests" in text
    assert text.count("| IX") == len(judged["points"])
