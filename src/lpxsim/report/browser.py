"""Open a report in headless Chromium: a screenshot, the rendered DOM, and the console's errors.

Used by the browser test (and by anyone who wants to check a report renders
without a display). Chromium runs with a throw-away profile, no network
services, and a virtual time budget so plotly finishes drawing before capture.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--virtual-time-budget=8000")
# Console messages chromium logs to stderr with --enable-logging=stderr, e.g.
#   [pid:tid:time:INFO:CONSOLE:1] "Uncaught ReferenceError: f is not defined", source: file:///x.html (1)
# (older builds: ':INFO:CONSOLE(1)]'). Headless logs console.error at INFO, so every message is kept.
_CONSOLE = re.compile(r':([A-Z]+\d*):CONSOLE(?:\(\d+\)|:\d+)\]\s*"(.*)", source: (\S*)')


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary on PATH, or None."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class BrowserCapture:
    screenshot: Path | None
    dom: str
    console: list[tuple[str, str, str]]  # (level, message, source)

    @property
    def script_errors(self) -> list[str]:
        """Uncaught exceptions and error-level console messages raised by the page's scripts."""
        return [msg for level, msg, _ in self.console
                if level in ("ERROR", "FATAL") or "Uncaught" in msg or "Error" in msg]

    def count(self, needle: str) -> int:
        return self.dom.count(needle)


def _run(binary: str, args: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="lpxsim-chromium-") as profile:
        cmd = [binary, *FLAGS, f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)


def capture(html: str | Path, screenshot: str | Path | None = None, size: tuple[int, int] = (1400, 2400),
            timeout_s: float = 120.0, binary: str | None = None) -> BrowserCapture:
    """Render `html` in headless Chromium: save a screenshot, return the DOM and the console messages."""
    binary = binary or find_chromium()
    if binary is None:
        raise FileNotFoundError("no chromium binary on PATH (Debian: apt-get install -y chromium)")
    url = Path(html).resolve().as_uri()
    console: list[tuple[str, str, str]] = []
    shot = None
    if screenshot is not None:
        shot = Path(screenshot).resolve()
        r = _run(binary, ["--enable-logging=stderr", "--v=0", f"--window-size={size[0]},{size[1]}",
                          f"--screenshot={shot}", url], timeout_s)
        console += _CONSOLE.findall(r.stderr)
        if not shot.is_file():
            raise RuntimeError(f"chromium wrote no screenshot (exit {r.returncode}): {r.stderr[-800:]}")
    r = _run(binary, ["--enable-logging=stderr", "--v=0", "--dump-dom", url], timeout_s)
    console += _CONSOLE.findall(r.stderr)
    return BrowserCapture(shot, r.stdout, console)
