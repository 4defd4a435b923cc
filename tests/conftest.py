"""Suite-wide setup: the step-cost cache lives in a fresh temporary folder, never the user's; shared fixtures."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

_CACHE_DIR = tempfile.mkdtemp(prefix="lpxsim-test-cache-")
os.environ["LPXSIM_CACHE"] = _CACHE_DIR  # set before any lpxsim import; worker processes inherit it
os.environ.pop("LPXSIM_NO_CACHE", None)
# Piped progress (one stderr line per stage) is tested on its own (test_fast_progress); elsewhere the tests read
# stderr for its error line, so progress is off unless a test turns it on.
os.environ["LPXSIM_PROGRESS"] = "0"


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty step-cost cache for one test (the process-wide object re-reads $LPXSIM_CACHE)."""
    from lpxsim.backends import memo as stepmemo
    from lpxsim.core import cache

    stepmemo.reset()  # this process's step-model memos belong to the previous cache
    monkeypatch.setenv("LPXSIM_CACHE", str(tmp_path / "cache"))
    cache.reset()
    yield cache.step_cache()
    stepmemo.reset()
    cache.reset()


@pytest.fixture(scope="module")
def tiny_lpx_program():
    """A small verified LPX program (llama_tiny on 8 chips, tp=4 x 2 stages, two streams) for the tests of the
    program's tables; one per test module (tests may change it)."""
    from lpxsim.lpu import compile_program
    from lpxsim.specs.model import ModelSpec

    r = compile_program(ModelSpec.from_path(Path(__file__).parent / "data" / "emulate" / "llama_tiny.json"), "lpx",
                        chips=8, context=12, concurrency=2, layout="tp=4,stages=2", chip_sram_bytes=400_000,
                        weights="bf16")
    assert r.report.ok
    return r.program
