"""In-process CLI fuzzing: run `lpxsim` on an argv with a time and memory bound, and check the outcome.

The promise under test (issue 15): whatever the arguments and input files, the CLI either succeeds,
or reports a finding with exit 1 (a failed verification), or exits 2 with ONE line on stderr that
starts with "error: " and names the field. Never a traceback, a hang or a blow-up.
"""

from __future__ import annotations

import contextlib
import io
import resource
import signal
import sys
from dataclasses import dataclass
from datetime import timedelta

from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st

from lpxsim.cli.main import run

CASE_TIME_LIMIT_S = 20  # hard stop (SIGALRM) of one case: a hang becomes a failure, not a stuck suite
CASE_MEMORY_LIMIT_BYTES = 2 * 1024**3  # extra address space one case may take before MemoryError

# Deterministic (derandomize) and fast; the hypothesis deadline flags a slow case, SIGALRM a hung one.
FUZZ_EXAMPLES = 120  # per fuzz test; 21 tests: > 2,000 cases in the default job
FUZZ = settings(derandomize=True, database=None, deadline=timedelta(seconds=10), print_blob=False,
                max_examples=FUZZ_EXAMPLES,
                phases=(Phase.explicit, Phase.generate, Phase.shrink),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large, HealthCheck.filter_too_much])


class CaseTimeout(Exception):
    """One fuzz case ran past CASE_TIME_LIMIT_S."""


@dataclass
class Outcome:
    argv: list[str]
    code: int | str
    stdout: str
    stderr: str
    exception: BaseException | None = None


def _alarm(signum, frame):  # noqa: ARG001
    raise CaseTimeout("case ran past its wall-time limit (a hang guard, not a speed check)")


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * resource.getpagesize()
    except OSError:
        return 0


@contextlib.contextmanager
def bounded(time_limit_s: float | None = None):
    """SIGALRM after `time_limit_s` (default CASE_TIME_LIMIT_S) and an address-space cap CASE_MEMORY_LIMIT_BYTES
    above today's."""
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_TIME_LIMIT_S if time_limit_s is None else time_limit_s)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    vm = _vm_bytes()
    if vm:
        cap = vm + CASE_MEMORY_LIMIT_BYTES
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def invoke(argv: list[str], time_limit_s: float | None = None) -> Outcome:
    """`lpxsim ARGV` in this process (the console entry, standalone_mode=False inside), bounded.

    `time_limit_s` guards against hangs; a case that compiles real programs on a cold cache gets a longer one,
    since a shared CI machine's wall time is not a measure of speed."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = ["lpxsim", *argv]
    code: int | str = 0
    exc = None
    try:
        with bounded(time_limit_s), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            run()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # a traceback, a CaseTimeout or a MemoryError: all are failures
        code, exc = "exception", e
    finally:
        sys.argv = saved
    return Outcome(list(argv), code, out.getvalue(), err.getvalue(), exc)


def check(o: Outcome, allow_exit_1: bool = False) -> None:
    """The promise: exit 0, or exit 2 with one `error: FIELD: ...` line (exit 1 only where allowed)."""
    with contextlib.suppress(Exception):  # outside a hypothesis test (a plain parametrized case)
        event(f"exit {o.code}")  # --hypothesis-show-statistics: how many cases got past validation
    if o.exception is not None:
        raise AssertionError(f"lpxsim {' '.join(o.argv)} raised {type(o.exception).__name__}: "
                             f"{o.exception}") from o.exception
    assert "Traceback" not in o.stderr, f"lpxsim {' '.join(o.argv)}: traceback\n{o.stderr}"
    allowed = (0, 1, 2) if allow_exit_1 else (0, 2)
    assert o.code in allowed, f"lpxsim {' '.join(o.argv)}: exit {o.code}\n{o.stderr[-2000:]}"
    if o.code == 2:
        lines = [ln for ln in o.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error: ")]
        assert len(errors) == 1, f"lpxsim {' '.join(o.argv)}: expected one error line, got\n{o.stderr}"
        assert len(errors[0]) > len("error: ") + 3, f"lpxsim {' '.join(o.argv)}: empty error line"


# --- value strategies: mostly wrong, sometimes right -----------------------------------------------

JUNK = st.sampled_from(["", " ", "nan", "NaN", "inf", "-inf", "1e309", "-1", "0", "-0", "1.5", "0.5", "abc", "1e18",
                        "10**18", "1_000", "1,000", "0x10", "32K", "100k", "1M", "10M", "11M", "1e13", "9" * 40,
                        "-9" * 20, "1e-300", "\x00", "é", "--json"])


def count_text(valid: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    """An option value: a valid count (as text, sometimes in human form) or something wrong."""
    human = valid.map(lambda v: f"{v / 1000:g}K" if v % 1000 == 0 and v >= 1000 else str(v))
    wrong = st.one_of(JUNK, st.integers(-(10**20), 10**20).map(str), st.floats(allow_nan=True, allow_infinity=True)
                      .map(repr), st.text(max_size=6))
    return _mostly_valid(st.one_of(valid.map(str), human), wrong)


def _mostly_valid(right: st.SearchStrategy[str], wrong: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Right 3 times in 4: with several options per command, a useful share of cases runs the command."""
    return st.integers(0, 3).flatmap(lambda i: wrong if i == 0 else right)


def real_text(valid: st.SearchStrategy[float]) -> st.SearchStrategy[str]:
    """A numeric option value: valid, or NaN/inf/negative/huge/junk."""
    return _mostly_valid(valid.map(repr), st.one_of(JUNK, st.floats(allow_nan=True, allow_infinity=True).map(repr),
                                                    st.text(max_size=6)))


def maybe(flag: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    """An option given with a value (mostly), left out, or given bare (no value: a usage error)."""
    return st.integers(0, 9).flatmap(
        lambda i: st.just([flag]) if i == 0 else st.just([]) if i <= 3 else values.map(lambda v: [flag, v]))


def argv(*parts: st.SearchStrategy[list[str]]) -> st.SearchStrategy[list[str]]:
    """Concatenate option groups in a drawn order."""
    return st.tuples(*parts).flatmap(lambda groups: st.permutations(groups)).map(
        lambda groups: [a for g in groups for a in g])
