"""The hardware catalog: every system loads, every number is sourced and graded, key figures hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from lpxsim.catalog import all_systems, get_system, system_names
from lpxsim.core.errors import UserError
from lpxsim.specs.hardware import Sourced, SystemSpec

DOCS = Path(__file__).resolve().parents[1] / "docs"
EXPECTED = {
    "lpx", "groq-v1", "vr-nvl72", "gb200-nvl72", "gb300-nvl72",
    "h100-hgx", "h200-hgx", "b200-hgx", "b300-hgx", "mi300x", "mi355x",
}  # fmt: skip


def _source_keys() -> set[str]:
    """Keys of the tables in docs/sources.md ('A / B' rows give both keys)."""
    keys: set[str] = set()
    for line in (DOCS / "sources.md").read_text().splitlines():
        m = re.match(r"\|\s*([^|]+?)\s*\|", line)
        if m and m.group(1) not in ("Key", "---"):
            keys.update(k.strip() for k in m.group(1).split("/"))
    return keys


def _assumption_keys() -> set[str]:
    text = (DOCS / "assumptions.md").read_text()
    return set(re.findall(r"`([a-z0-9][a-z0-9-]+)`", text))


def test_every_expected_system_is_in_the_catalog() -> None:
    assert set(system_names()) >= EXPECTED
    for s in all_systems():
        assert isinstance(s, SystemSpec)
        assert get_system(s.name) is s


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_number_has_a_documented_source_and_grade(name: str) -> None:
    s = get_system(name)
    rows = s.provenance_rows()
    assert len(rows) >= 20
    sources, assumptions = _source_keys(), _assumption_keys()
    for r in rows:
        assert r.grade in {"P", "S", "E", "U"}, r
        assert r.unit.strip(), r
        if r.source.startswith("assumption:"):
            assert r.source.removeprefix("assumption:") in assumptions, (
                f"{r.path}: {r.source} not in assumptions.md"
            )
            assert r.grade in {"U", "E"}, f"{r.path}: an assumption cannot be graded {r.grade}"
        else:
            assert r.source in sources, f"{r.path}: source {r.source!r} not in docs/sources.md"


def test_provenance_walk_reaches_every_sourced_field() -> None:
    s = get_system("lpx")
    paths = {r.path for r in s.provenance_rows()}
    assert {
        "chip.memory_bytes",
        "chip.peak_flops.fp8",
        "power_w",
        "topology.links.intra_node.latency_s",
    } <= paths
    assert "variants.trays-32x8.links.inter_node.lanes_per_chip" in paths
    n_sourced = sum(1 for _ in _count_sourced(s))
    assert n_sourced == len(paths)


def _count_sourced(obj: object):
    if isinstance(obj, Sourced):
        yield obj
    elif isinstance(obj, BaseModel):
        for f in type(obj).model_fields:
            yield from _count_sourced(getattr(obj, f))
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _count_sourced(v)


def test_sourced_rejects_empty_source_and_bad_grade() -> None:
    with pytest.raises(ValueError):
        Sourced(value=1, unit="B", source=" ", grade="P")
    with pytest.raises(ValueError):
        Sourced(value=1, unit="B", source="SA", grade="X")


def test_lpx_key_numbers() -> None:
    s = get_system("groq3-lpx")
    assert s.name == "lpx" and s.is_lpu
    assert float(s.chip.memory_bytes) == 500e6
    assert s.chips_per_unit == 256 == s.total_chips(1)
    assert s.memory_bytes() == pytest.approx(128e9)
    assert float(s.chip.memory_bw_Bps) == 150e12
    assert s.chip.flops("fp8") == 1.2e15
    assert s.chip.flops("fp4") == 1.2e15  # no FP4 on LP30: falls back to FP8
    assert s.chip.clock_hz is None or s.chip.clock_hz.grade in {"U", "E"}
    assert s.power_w.grade == "U" and s.power_w.source == "assumption:lpx-rack-power"
    assert s.total_chips(9) == 2304
    assert s.memory_bytes(9) == pytest.approx(1152e9)  # Hot Chips "1,152 GB"
    with pytest.raises(UserError, match="units"):
        s.total_chips(10)


def test_lpx_rack_bandwidth_matches_nvidia_within_a_few_percent() -> None:
    s = get_system("lpx")
    derived = s.scale_up_bidir_Bps(line_rate=True)
    assert derived == pytest.approx(float(s.published["scale_up_Bps"]), rel=0.03)  # 645 vs 640 TB/s
    assert s.scale_up_bidir_Bps(line_rate=False) < derived
    assert s.lane_budget() <= float(s.chip.c2c_lanes)
    trays = s.with_topology("trays-32x8")
    assert trays.chips_per_unit == 256
    assert trays.lane_budget() <= float(s.chip.c2c_lanes)
    assert trays.scale_up_bidir_Bps() == pytest.approx(derived, rel=0.01)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_published_unit_figures_agree_with_chip_arithmetic(name: str) -> None:
    s = get_system(name)
    checks = {
        "fp8_flops": lambda: s.peak_flops("fp8"),
        "bf16_flops": lambda: s.peak_flops("bf16"),
        "sram_bytes": s.memory_bytes,
        "sram_bw_Bps": s.memory_bw_Bps,
        "hbm_bytes": s.memory_bytes,
        "hbm_bw_Bps": s.memory_bw_Bps,
        "scale_up_Bps": s.scale_up_bidir_Bps,
        "chips": lambda: s.chips_per_unit,
    }
    for key, derived in checks.items():
        if key in s.published:  # vendor rounding (e.g. LPX 315 vs 307 PF, VR 1.2 vs 1.26 EF) stays within 6 %
            published = float(s.published[key])
            if key == "hbm_bytes" and s.chip.memory_bytes.source == "NVSMI-MEM":
                # the chip's capacity is the driver's reading; the vendor's "GB" of HBM are binary (NVSMI-MEM)
                published *= 2**30 / 1e9
            assert derived() == pytest.approx(published, rel=0.06), key


@pytest.mark.parametrize("name", sorted(EXPECTED - {"lpx", "groq-v1"}))
def test_gpu_systems_carry_what_the_cost_model_reads(name: str) -> None:
    s = get_system(name)
    c = s.chip
    assert c.kind == "gpu"
    assert {"bf16", "fp8"} <= set(c.peak_flops)
    assert c.flops("bf16") < c.flops("fp8") <= c.flops("fp4")
    assert c.nvlink_Bps is not None and float(c.nvlink_Bps) > 0
    for key in ("scale_up_busbw_Bps", "allreduce_alpha_s", "allreduce_alpha_scale_out_s"):
        assert key in c.extra, key
    assert float(c.extra["scale_up_busbw_Bps"]) <= float(c.nvlink_Bps)
    up, outl = s.topology.links["scale_up"], s.topology.links["scale_out"]
    assert float(up.latency_s) < float(outl.latency_s)
    assert up.bandwidth_Bps > outl.bandwidth_Bps
    assert float(s.power_w) > s.chips_per_unit * float(c.power_w)  # unit power includes more than the GPUs


def test_gpu_figures_from_the_reference_table() -> None:
    h100, vr, gb300 = get_system("h100"), get_system("vera-rubin-nvl72"), get_system("gb300")
    assert float(h100.chip.memory_bw_Bps) == 3.35e12 and h100.chip.flops("fp8") == 1.979e15
    assert float(h100.chip.extra["scale_up_busbw_Bps"]) == 370e9
    assert h100.scale_up_bidir_Bps() == pytest.approx(7.2e12)  # 8 x 900 GB/s
    assert vr.chips_per_unit == 72 and float(vr.chip.memory_bytes) == 288e9
    assert float(vr.chip.memory_bw_Bps) == 22e12
    assert vr.chip.flops("fp4") == 35e15  # dense; the 50 PF 'inference' figure is sparse
    assert vr.power_w.grade == "U"
    assert float(gb300.power_w) == 135e3


def test_groq_v1_key_numbers() -> None:
    s = get_system("tsp-v1")
    assert s.topology.kind == "dragonfly"
    assert s.chips_per_unit == 64 and s.max_units == 145
    assert float(s.chip.memory_bytes) == 220 * 2**20
    assert s.chip.flops("int8") == 750e12 and s.chip.flops("bf16") == 188e12
    assert s.lane_budget() <= float(s.chip.c2c_lanes)
    assert float(s.published["max_tsps"]) == 145 * 72


def test_unknown_system_and_variant_are_user_errors() -> None:
    with pytest.raises(UserError, match="did you mean lpx"):
        get_system("lpz")
    with pytest.raises(UserError, match="topology"):
        get_system("lpx").with_topology("trays-64x4")
