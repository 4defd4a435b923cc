"""lpxsim starts numpy's OpenBLAS with one thread unless the user chose a number."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = ("import lpxsim, os, numpy; "
         "print(os.environ.get('OPENBLAS_NUM_THREADS'), len(os.listdir('/proc/self/task')))")


def _probe(env_value: str | None) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    value, threads = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                                    check=True).stdout.split()
    return value, int(threads)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads through /proc (Linux)")
def test_one_blas_thread_by_default() -> None:
    """No OpenBLAS worker thread beside the main one once numpy is imported through lpxsim."""
    assert _probe(None) == ("1", 1)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads through /proc (Linux)")
def test_the_users_setting_wins() -> None:
    value, threads = _probe("2")
    assert value == "2"
    assert threads == min(2, os.cpu_count() or 1)  # OpenBLAS starts its workers as asked (up to the cores)
