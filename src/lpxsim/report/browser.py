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


# Appended to a copy of the page: after load (and plotly's drawing), list every element wider than the
# viewport or reaching past either edge, and write the list into the DOM for --dump-dom to return. An
# element wholly left of the page (plotly's text-measuring svg at x = -10,000) is hidden by design.
_PROBE = """<script>window.addEventListener('load',function(){setTimeout(function(){
var W=document.documentElement.clientWidth,bad=[];
document.querySelectorAll('body *').forEach(function(e){var r=e.getBoundingClientRect();
if(r.width>0&&r.height>0&&r.right>0&&(r.right>W+1||r.left<-1||r.width>W)){var c=(typeof e.className==='string'&&e.className)?
'.'+e.className.trim().split(/\\s+/).join('.'):'';bad.push(e.tagName.toLowerCase()+(e.id?'#'+e.id:'')+c+
' '+Math.round(r.left)+'..'+Math.round(r.right));}});
var p=document.createElement('pre');p.id='lpxsim-overflow';p.textContent=JSON.stringify({width:W,
scroll_width:document.documentElement.scrollWidth,bad:bad});document.body.appendChild(p);},1500);});</script>"""


@dataclass
class Overflow:
    width: int  # the viewport's width in CSS px
    scroll_width: int  # the page's width: more than `width` means a horizontal scroll bar
    bad: list[str]  # 'tag#id.class left..right' of every element past an edge of the viewport


def overflow(html: str | Path, width: int = 1280, height: int = 900, timeout_s: float = 120.0,
             binary: str | None = None) -> Overflow:
    """Open `html` at `width` CSS px in headless Chromium and list the elements that do not fit it."""
    import json

    binary = binary or find_chromium()
    if binary is None:
        raise FileNotFoundError("no chromium binary on PATH (Debian: apt-get install -y chromium)")
    page = Path(html).read_text()
    with tempfile.TemporaryDirectory(prefix="lpxsim-overflow-") as d:
        probe = Path(d) / "probe.html"
        probe.write_text(page.replace("</body>", _PROBE + "</body>", 1) if "</body>" in page else page + _PROBE)
        r = _run(binary, [f"--window-size={width},{height}", "--hide-scrollbars", "--dump-dom", probe.as_uri()],
                 timeout_s)
    m = re.search(r'<pre id="lpxsim-overflow">(.*?)</pre>', r.stdout, re.S)
    if m is None:
        raise RuntimeError(f"the overflow probe did not run (chromium exit {r.returncode}): {r.stderr[-800:]}")
    import html as html_mod

    d = json.loads(html_mod.unescape(m.group(1)))
    return Overflow(int(d["width"]), int(d["scroll_width"]), list(d["bad"]))
