"""Cache wiring (issue 10): the per-shape step memo, its persistence, `lpxsim cache`, `--no-cache`,
and a start-up that imports only what the command needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lpxsim.backends import memo as stepmemo
from lpxsim.core.errors import DoesNotFit
from lpxsim.step.protocol import DecodeBatch, PrefillChunk, StepCost

ESTIMATE = ["estimate", "llama-3.1-8b", "--system", "h200-hgx", "--gpus", "1", "--tp", "1", "--isl", "2000",
            "--osl", "200", "--concurrency", "4", "--json"]

# Runs the CLI, then reports on stderr how many backends were built and step shapes priced, and which
# heavy libraries were imported (atexit: after the command, before the memo writes its tables).
_PROBE = """
import atexit, sys
from lpxsim.backends import memo as stepmemo
def _report():
    heavy = [m for m in ("pandas", "plotly", "torch", "matplotlib", "dask", "pyarrow", "rich") if m in sys.modules]
    sys.stderr.write("PROBE " + repr((stepmemo.stats.built, stepmemo.stats.priced, heavy)) + "\\n")
atexit.register(_report)
sys.argv = ["lpxsim"] + sys.argv[1:]
from lpxsim.cli.main import run
run()
"""


def _cli(args: list[str], cache_dir: Path, check: bool = True) -> tuple[subprocess.CompletedProcess, tuple]:
    env = {**os.environ, "LPXSIM_CACHE": str(cache_dir)}
    env.pop("LPXSIM_NO_CACHE", None)
    res = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, env=env)
    if check:
        assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stderr.splitlines() if ln.startswith("PROBE "))
    return res, eval(line.removeprefix("PROBE "))  # noqa: S307 - our own repr of a tuple


def test_a_second_run_builds_and_prices_nothing(tmp_path: Path) -> None:
    first, (built1, priced1, _) = _cli(ESTIMATE, tmp_path / "c")
    second, (built2, priced2, _) = _cli(ESTIMATE, tmp_path / "c")
    assert built1 == 1 and priced1 > 0
    assert (built2, priced2) == (0, 0)
    assert json.loads(second.stdout) == json.loads(first.stdout)


def test_no_cache_writes_nothing_and_recomputes(tmp_path: Path) -> None:
    for args in (["--no-cache", *ESTIMATE], [*ESTIMATE, "--no-cache"]):
        _, (built, priced, _) = _cli(args, tmp_path / "off")
        assert built == 1 and priced > 0
        assert not any((tmp_path / "off").rglob("*.json")) if (tmp_path / "off").exists() else True


def test_estimate_imports_no_heavy_library(tmp_path: Path) -> None:
    # Cold, a GPU estimate reads aiconfigurator-core's measured parquet tables (pyarrow, never pandas);
    # warm, the step table answers and not even pyarrow is imported; --json never draws, so no rich.
    _, (_, _, heavy_cold) = _cli(ESTIMATE, tmp_path / "c")
    # (pandas only where the engine's answer comes from the serving simulator: an arrival-sensitive load,
    # docs/engine.md "One queueing answer")
    assert set(heavy_cold) <= {"pyarrow", "pandas"} and "pyarrow" in heavy_cold
    _, (_, _, heavy_warm) = _cli(ESTIMATE, tmp_path / "c")
    # warm: the step table answers; pandas/pyarrow only where the simulator answers (its runs are not cached:
    # issue 26 follow-up)
    assert set(heavy_warm) <= {"pyarrow", "pandas"}


def test_cache_info_and_clear(tmp_path: Path) -> None:
    d = tmp_path / "c"
    _cli(ESTIMATE, d)
    res, _ = _cli(["cache", "info", "--json"], d)
    info = json.loads(res.stdout)
    assert info["path"] == str(d) and info["enabled"] and info["entries"] >= 1 and info["bytes"] > 0
    res, _ = _cli(["cache", "info"], d)
    assert str(d) in res.stdout.replace("\n", "") or "entries" in res.stdout
    res, _ = _cli(["cache", "clear", "--json"], d)
    assert json.loads(res.stdout)["removed"] == info["entries"]
    res, _ = _cli(["cache", "info", "--json"], d)
    assert json.loads(res.stdout)["entries"] == 0
    res, _ = _cli(["cache", "clear"], d)
    assert "removed 0 entries" in res.stdout


def test_help_through_the_console_entry_lists_every_command(tmp_path: Path) -> None:
    res, _ = _cli(["--help"], tmp_path / "c")
    from lpxsim.cli.main import COMMAND_NAMES

    for name in COMMAND_NAMES:
        assert name in res.stdout, name
    assert "--no-cache" in res.stdout


# --- the memo itself, on a backend that counts what it is asked --------------------------------------

class _Counting:
    """A fake backend: step cost = contexts + tokens, refuses batches over 4; counts every call."""

    name, chips, power_w = "fake", 2, 1000.0
    admission_hold = (8, 60, 1)  # a remembered attribute that is a tuple (TensorRT-LLM's attention-DP hold)

    def __init__(self) -> None:
        self.calls = 0

    def decode_step(self, batch: DecodeBatch) -> StepCost:
        self.calls += 1
        if batch.size > 4:
            raise DoesNotFit("batch", f"{batch.size} sequences do not fit")
        return StepCost(sum(batch.contexts) * 1e-6, sum(batch.contexts) * 5e-7)

    def prefill(self, chunk: PrefillChunk) -> StepCost:
        self.calls += 1
        return StepCost.serial(chunk.tokens * chunk.sequences * 1e-6 + chunk.context * 1e-9)

    def verify(self, batch: DecodeBatch, k: int) -> StepCost:
        self.calls += 1
        return StepCost.serial((k + 1) * batch.size * 1e-6)

    def kv_capacity_bytes(self) -> float:
        return 1e9

    def kv_bytes(self, context: int) -> float:
        return context * 10.0

    def max_batch(self) -> int:
        return 4

    def detail(self) -> str:
        return "only the backend knows"


def _memo(built: list[_Counting]) -> stepmemo.MemoStepModel:
    def build() -> _Counting:
        built.append(_Counting())
        return built[-1]

    return stepmemo.MemoStepModel(build, stepmemo.table_key(("fake-backend", 1)))


def test_memo_prices_each_shape_once_and_remembers_refusals(fresh_cache) -> None:
    built: list[_Counting] = []
    m = _memo(built)
    assert len(built) == 1  # no table yet: built at once, so a model that does not fit fails here
    a = m.decode_step(DecodeBatch.uniform(3, 100))
    b = m.decode_step(DecodeBatch.uniform(3, 100))
    assert a == b == StepCost(300 * 1e-6, 300 * 5e-7)
    assert m.prefill(PrefillChunk(64, 10, 2)) == m.prefill(PrefillChunk(64, 10, 2))
    for _ in range(2):
        with pytest.raises(DoesNotFit) as e:
            m.decode_step(DecodeBatch.uniform(5, 10))
        assert e.value.field == "batch" and "5 sequences" in e.value.message
    calls = built[0].calls
    m.decode_step(DecodeBatch.uniform(3, 100))
    m.verify(DecodeBatch.uniform(2, 50), 3)
    m.verify(DecodeBatch.uniform(2, 50), 3)
    assert built[0].calls == calls + 1
    assert (m.name, m.chips, m.power_w, m.max_batch(), m.kv_capacity_bytes(), m.kv_bytes(7)) == (
        "fake", 2, 1000.0, 4, 1e9, 70.0)
    assert m.detail() == "only the backend knows"  # anything else goes to the backend


def test_memo_table_persists_and_a_new_process_builds_nothing(fresh_cache) -> None:
    built: list[_Counting] = []
    m = _memo(built)
    want = [m.decode_step(DecodeBatch.uniform(2, 40)), m.prefill(PrefillChunk(16, 0, 1))]
    with pytest.raises(DoesNotFit):
        m.decode_step(DecodeBatch.uniform(8, 40))
    m.flush()
    fresh_cache._memory.clear()  # as a new process would: only the disk
    again: list[_Counting] = []
    m2 = _memo(again)
    assert [m2.decode_step(DecodeBatch.uniform(2, 40)), m2.prefill(PrefillChunk(16, 0, 1))] == want
    with pytest.raises(DoesNotFit):
        m2.decode_step(DecodeBatch.uniform(8, 40))
    assert m2.name == "fake" and m2.max_batch() == 4
    assert m2.admission_hold == (8, 60, 1)  # the same value and type as the backend's (JSON stores a list)
    assert again == []  # answered from the table: the backend was never built
    m2.decode_step(DecodeBatch.uniform(1, 1))  # a new shape builds it
    assert len(again) == 1


def test_a_corrupt_table_is_rebuilt_not_fatal(fresh_cache) -> None:
    key = stepmemo.table_key(("fake-backend", 1))
    fresh_cache.put(key, {"meta": "not a table"})
    built: list[_Counting] = []
    m = _memo(built)
    assert len(built) == 1 and m.decode_step(DecodeBatch.uniform(1, 10)) == StepCost(10 * 1e-6, 10 * 5e-7)


def test_make_step_model_shares_one_memo_per_replica(fresh_cache) -> None:
    from lpxsim.backends.factory import Layout, make_step_model

    a = make_step_model("llama-3.1-8b", "h200-hgx", Layout(gpus=1, tp=1))
    b = make_step_model("llama-3.1-8b", "h200-hgx", Layout(gpus=1, tp=1))
    c = make_step_model("llama-3.1-8b", "h200-hgx", Layout(gpus=2, tp=2))
    assert a is b and a is not c
    assert isinstance(a, stepmemo.MemoStepModel)
    direct = a.inner.decode_step(DecodeBatch.uniform(8, 3000))
    assert a.decode_step(DecodeBatch.uniform(8, 3000)) == direct


@pytest.mark.heavy
def test_a_second_lpx_estimate_compiles_nothing(tmp_path: Path) -> None:
    args = ["estimate", "llama-3.1-8b", "--system", "lpx", "--isl", "4000", "--osl", "500", "--json"]
    first, (built1, priced1, heavy) = _cli(args, tmp_path / "c")
    second, (built2, priced2, _) = _cli(args, tmp_path / "c")
    assert built1 == 1 and priced1 > 0 and heavy == []
    assert (built2, priced2) == (0, 0)  # no LpxStepModel, so no compile at all
    assert json.loads(second.stdout) == json.loads(first.stdout)


def test_a_memo_pickles_without_its_backend(fresh_cache) -> None:
    import pickle

    from lpxsim.backends.factory import Layout, make_step_model

    a = make_step_model("llama-3.1-8b", "h200-hgx", Layout(gpus=1, tp=1))
    want = a.decode_step(DecodeBatch.uniform(4, 1000))
    b = pickle.loads(pickle.dumps(a))
    assert b._inner is None and b.decode_step(DecodeBatch.uniform(4, 1000)) == want and b._inner is None
    assert b.prefill(PrefillChunk(100, 0, 1)) == a.prefill(PrefillChunk(100, 0, 1))
