"""Suite-wide setup: the step-cost cache lives in a fresh temporary folder, never the user's."""

from __future__ import annotations

import os
import tempfile

import pytest

_CACHE_DIR = tempfile.mkdtemp(prefix="lpxsim-test-cache-")
os.environ["LPXSIM_CACHE"] = _CACHE_DIR  # set before any lpxsim import; worker processes inherit it
os.environ.pop("LPXSIM_NO_CACHE", None)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty step-cost cache for one test (the process-wide object re-reads $LPXSIM_CACHE)."""
    from lpxsim import cache, stepmemo

    stepmemo.reset()  # this process's step-model memos belong to the previous cache
    monkeypatch.setenv("LPXSIM_CACHE", str(tmp_path / "cache"))
    cache.reset()
    yield cache.step_cache()
    stepmemo.reset()
    cache.reset()
