"""The emulator tests need the `test` extra (torch, transformers): without it they must fail, not skip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent
HIDE = "import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None; import pytest; "


FILES = ["test_emulate_batch.py", "test_emulate_cli.py", "test_emulate_graph.py", "test_emulate_program.py"]


def test_missing_torch_fails_collection() -> None:
    paths = [str(TESTS / f) for f in FILES]
    code = HIDE + f"sys.exit(pytest.main([*{paths!r}, '--collect-only', '-q', '-p', 'no:cacheprovider']))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode not in (0, 5), r.stdout[-2000:]  # 5 = nothing collected (module-level skips)
    for f in FILES:  # every file errors, naming the missing module
        assert f"ERROR {Path('tests') / f}" in r.stdout or f"ERROR tests/{f}" in r.stdout or f in r.stdout
    assert r.stdout.count("ImportError") + r.stdout.count("ModuleNotFoundError") >= len(FILES), r.stdout[-2000:]
