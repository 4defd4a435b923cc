"""The layout search (issue 26 item 4): a Pareto set over layouts, whole racks on LPX, the stated objective,
and prefill scored with decode."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lpxsim.backends.factory import Layout
from lpxsim.catalog import get_model, get_system
from lpxsim.core.errors import UserError
from lpxsim.engine.layouts import NO_KV_SPREAD, lpx_sizes, no_spread_variant, replica_layouts
from lpxsim.engine.pareto import dominates, nondominated
from lpxsim.engine.search import operating_point
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost


@dataclass
class Toy:
    """A replica with a closed form: decode step = base + per_seq x batch; prefill = per_token x tokens."""

    name: str
    base_s: float = 2e-3
    per_seq_s: float = 1e-4
    prefill_per_token_s: float = 1e-6
    chips: int = 8
    power_w: float = 10e3
    kv_capacity: float = 64 * 12_000 * 1e3

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        return StepCost.serial(self.base_s + self.per_seq_s * batch.size)

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        return StepCost.serial(self.prefill_per_token_s * chunk.tokens * chunk.sequences)

    def verify(self, batch: DecodeBatch, k: int) -> StepCost:
        return self.decode_step(batch)

    def kv_capacity_bytes(self) -> float:
        return self.kv_capacity

    def kv_bytes(self, context: int) -> float:
        return 1e3 * context

    def max_batch(self) -> int:
        return 4096


def _factory(toys: dict[int, Toy]):
    def make(model, system, layout, weights, kv, kv_layout):
        return toys[layout.gpus]
    return make


# Decode at one user: A 2.1 ms, B 2.6 ms a token. Prefill of 10,000 tokens: A 145 ms, B 10 ms.
SLOW_PREFILL = Toy("A: fast decode, 145 ms prefill", base_s=2.0e-3, prefill_per_token_s=14.5e-6)
FAST_PREFILL = Toy("B: slower decode, 10 ms prefill", base_s=2.5e-3, prefill_per_token_s=1e-6, chips=16)


def _ask(objective: str, osl: int = 100):
    return operating_point(get_model("llama-3.1-8b"), "h200-hgx", 10_000, osl, 50.0, objective=objective,
                           factory=_factory({8: SLOW_PREFILL, 16: FAST_PREFILL}),
                           layouts=[Layout(gpus=8), Layout(gpus=16)])


def test_a_slow_prefill_does_not_win_the_latency_objective() -> None:
    op = _ask("latency")
    a, b = op.candidates
    assert a.batch1_tok_s_user > b.batch1_tok_s_user  # A wins on the decode period alone...
    assert a.batch1_ttft_s > 0.14 and b.batch1_ttft_s < 0.02
    assert a.batch1_e2e_s > b.batch1_e2e_s  # ...but its request takes longer: TTFT + (OSL - 1) x TPOT
    assert op.objective == "latency" and op.layout.endswith(FAST_PREFILL.name)
    assert op.concurrency == 1 and op.e2e_s == pytest.approx(b.batch1_e2e_s)


def test_the_objective_decides_the_pick() -> None:
    eff, thr = _ask("efficiency"), _ask("throughput")
    per_mw = {c.layout: c.tok_s_per_mw for c in eff.candidates}
    assert eff.tok_s_per_mw == max(per_mw.values())
    per_chip = {c.layout: c.tok_s_total / c.chips for c in thr.candidates}
    assert thr.tok_s_total / thr.replica_chips == pytest.approx(max(per_chip.values()))
    with pytest.raises(UserError, match="objective"):
        _ask("fastest")


def _points(op) -> list[tuple[float, float]]:
    pts = [(c.batch1_tok_s_user, c.batch1_tok_s_per_mw) for c in op.candidates if c.batch1_tok_s_user > 0]
    return pts + [(c.tok_s_user, c.tok_s_per_mw) for c in op.candidates if c.feasible]


def _assert_pareto(op) -> None:
    front = [(p.tok_s_user, p.tok_s_per_mw) for p in op.pareto]
    assert front and all(nondominated(front))
    for pt in _points(op):  # every point the search priced is on the set or beaten by a member of it
        assert not any(dominates(pt, f) for f in front)
        assert pt in front or any(dominates(f, pt) for f in front)


def test_the_search_returns_a_pareto_set() -> None:
    _assert_pareto(_ask("efficiency"))
    assert nondominated([(1, 2), (2, 1), (1, 1), (2, 1)]) == [True, True, False, True]


def test_rubin_pareto_set_holds_both_layouts() -> None:
    """Issue 26: Rubin's frontier was TP1 x72 alone while the AA section ran TP4 x18; the search's set holds both,
    each labelled with its layout."""
    op = operating_point(get_model("gemma-4-31b"), "vr-nvl72", 10_000, 256, 100.0)
    _assert_pareto(op)
    layouts = {p.replica_layout for p in op.pareto}
    assert {"tp=1,ep=1,pp=1", "tp=4,ep=1,pp=1"} <= layouts
    tried = {c.replica_layout for c in op.candidates}
    assert len(tried) >= 3  # more than the backend's two picks: every TP x PP x KVP layout, screened


def test_lpx_sizes_run_from_the_fewest_chips_to_the_whole_rack() -> None:
    s = get_system("lpx")
    for model, context in (("gemma-4-31b", 10_256), ("gemma-4-31b", 100_256), ("llama-3.1-8b", 10_256)):
        m = get_model(model)
        sizes = lpx_sizes(m, s, context, "fp8", "bf16", "separate")
        assert sizes == sorted(set(sizes)) and sizes[-1] == s.chips_per_unit  # a whole rack is always tried
        assert all(c % s.topology.chips_per_node == 0 for c in sizes)
        assert 128 in sizes or sizes[0] > 128
    lays, _ = replica_layouts(get_model("gemma-4-31b"), s, 10_256, "fp8", "bf16", "separate")
    assert [lay.chips for lay in lays][-1] == 256


def test_a_pick_that_spreads_kv_is_also_tried_without() -> None:
    lay = Layout(chips=128)
    assert no_spread_variant(lay, "gemma on lpx (tp=8,stages=16,kvsplit=2,kvspread=15,replicas=1)") == Layout(
        chips=128, lpx_layout=NO_KV_SPREAD)
    assert no_spread_variant(lay, "gemma on lpx (tp=16,stages=16,kvsplit=4,replicas=1)") is None
    assert no_spread_variant(Layout(chips=128, lpx_layout=NO_KV_SPREAD), "x (kvspread=3)") is None


def test_sweep_deployments_run_over_layouts() -> None:
    from lpxsim.bench.sweep import grid

    pts = grid("gemma-4-31b", ["lpx", "vr-nvl72"], [10_000], [1], deployments="all")
    lpx = {p.get("replica_chips") for p in pts if p["target"] == "lpx"}
    assert lpx == {None, 80, 128, 160}  # the rack's own layout and every smaller size of the ladder, tiled
    assert {p.get("goal") for p in pts if p["target"] == "vr-nvl72"} == {"latency", "throughput"}
    assert grid("gemma-4-31b", ["lpx", "vr-nvl72"], [10_000], [1]) == pts  # the default: the same, screened later
    rack = grid("gemma-4-31b", ["lpx"], [10_000], [1], deployments="rack")
    assert all("replica_chips" not in p for p in rack)  # the rack's points are keyed as they always were
    assert rack == [p for p in pts if p["target"] == "lpx" and "replica_chips" not in p]
    with pytest.raises(UserError, match="deployments"):
        grid("gemma-4-31b", ["lpx"], [10_000], [1], deployments="every")


def test_the_sweep_frontier_is_the_pareto_set_over_deployments() -> None:
    """Rubin at one context on its two layouts (the sweep's rows, issue 26's TP1 x72 and TP4 x18): the frontier is
    marked over both, and each curve is named with its layout."""
    import pandas as pd

    from lpxsim.bench.frontier import mark_frontier
    from lpxsim.report.curves import deployment_curves

    rows = [("latency", "TP4 fp8", 18, 1, 318.0, 1_347.0), ("latency", "TP4 fp8", 18, 32, 302.0, 41_000.0),
            ("throughput", "TP1 fp8", 72, 1, 241.0, 1_030.0), ("throughput", "TP1 fp8", 72, 9_792, 15.6, 748_000.0)]
    df = pd.DataFrame([{"target": "vr-nvl72", "context": 10_000, "goal": g, "layout": lay, "replicas": r,
                        "concurrency": c, "tok_s_user": u, "tok_s_per_mw": mw, "tok_s_total": mw / 5}
                       for g, lay, r, c, u, mw in rows])
    df = mark_frontier(mark_frontier(df, y="tok_s_per_mw", column="on_frontier_mw"))
    assert list(df["on_frontier_mw"]) == [True, True, False, True]  # both layouts on it, TP1 at one user beaten
    assert list(df["on_frontier"]) == list(df["on_frontier_mw"])
    names = [n for n, _ in deployment_curves(df)]
    assert names == ["vr-nvl72 (latency layout): TP4 fp8 x18", "vr-nvl72 (throughput layout): TP1 fp8 x72"]
