"""Whether the browser tests may skip: Chromium is a system package, not a Python dependency.

On a developer machine without Chromium the browser checks skip with a reason. Where Chromium is
meant to be installed (CI sets LPXSIM_REQUIRE_BROWSER=1, see README), a missing binary FAILS the
test, so a broken CI image cannot turn the real-browser check into a silent skip.
"""

from __future__ import annotations

import os

import pytest

from lpxsim.report.browser import find_chromium

REQUIRED = os.environ.get("LPXSIM_REQUIRE_BROWSER", "") not in ("", "0")


def chromium_or_skip() -> str:
    """The Chromium path; without one, skip (developer machine) or fail (LPXSIM_REQUIRE_BROWSER=1)."""
    path = find_chromium()
    if path is None:
        if REQUIRED:
            pytest.fail("LPXSIM_REQUIRE_BROWSER=1 but no chromium is installed")
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium; CI installs it and sets "
                    "LPXSIM_REQUIRE_BROWSER=1)")
    return path
