"""In-process CLI fuzzing: run `lpxsim` on an argv with a time and memory bound, and check the outcome.

The promise under test (issue 15): whatever the arguments and input files, the CLI either succeeds,
or reports a finding with exit 1 (a failed verification), or exits 2 with ONE line on stderr that
starts with "error: " and names the field. Never a traceback, a hang or a blow-up.
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import signal
import sys
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st

from lpxsim.cli.main import run

CASE_TIME_LIMIT_S = 20  # hard stop (SIGALRM) of one case: a hang becomes a failure, not a stuck suite
CASE_MEMORY_LIMIT_BYTES = 2 * 1024**3  # extra address space one case may take before MemoryError

# Deterministic (derandomize). No hypothesis deadline: a per-case time limit is a timed assertion that fails on a
# loaded machine (plan point's cases did); SIGALRM still turns a hung case into a failure.
FUZZ_EXAMPLES = 120  # per fuzz test (some set fewer); > 2,000 cases in the default job
FUZZ = settings(derandomize=True, database=None, deadline=None, print_blob=False,
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


# --- generators of the issue-30 kinds: each draws a fresh case of its kind, not a copied one -------------

def nested_json(depth: int, style: str) -> str:
    """JSON nested `depth` levels: lists, objects, or both alternating."""
    if style == "list":
        return "[" * depth + "]" * depth
    if style == "object":
        return '{"a":' * depth + "1" + "}" * depth
    opens = ['{"k":' if i % 2 else "[" for i in range(depth)]
    closes = ["}" if i % 2 else "]" for i in reversed(range(depth))]
    return "".join(opens) + "0" + "".join(closes)


def nested_yaml(depth: int, style: str) -> str:
    """YAML nested `depth` levels: flow lists, flow maps, or block mappings by indentation."""
    if style == "flow-list":
        return "key: " + "[" * depth + "]" * depth + "\n"
    if style == "flow-map":
        return "key: " + "{a: " * depth + "1" + "}" * depth + "\n"
    return "".join(" " * i + f"k{i}:\n" for i in range(depth)) + " " * depth + "v\n"


DEEP = st.one_of(st.integers(33, 400), st.integers(401, 5_000), st.integers(5_001, 200_000))


@st.composite
def deep_json(draw) -> str:
    """A JSON document nested past the cap (33 levels up to 200K): alone, or under a key of an object."""
    body = nested_json(draw(DEEP), draw(st.sampled_from(["list", "object", "mixed"])))
    key = draw(st.sampled_from([None, "hidden_size", "text_config", "layer_types", "rope_parameters", "x"]))
    return body if key is None else json.dumps({"hidden_size": 8, "num_hidden_layers": 1})[:-1] + f', "{key}": {body}}}'


@st.composite
def deep_yaml(draw) -> str:
    """A YAML document nested past the cap, flow or block style."""
    return nested_yaml(draw(DEEP.filter(lambda d: d < 20_000)), draw(st.sampled_from(["flow-list", "flow-map", "block"])))


HUGE_DIGITS = st.integers(4_301, 60_000)  # past Python's integer-digit limit (4,300)


@st.composite
def huge_int(draw) -> str:
    """An integer literal longer than Python's digit limit, sometimes negative."""
    n = draw(HUGE_DIGITS)
    return draw(st.sampled_from(["", "-"])) + draw(st.sampled_from("123456789")) + "0" * (n - 1)


@st.composite
def non_utf8(draw) -> bytes:
    """Bytes that are not UTF-8 text: random binary with an invalid sequence, Latin-1, or UTF-16/32."""
    kind = draw(st.sampled_from(["binary", "latin1", "utf16", "utf32", "truncated"]))
    text = draw(st.text(min_size=1, max_size=40)) + ": é"
    if kind == "latin1":
        return ("name: café " + text).encode("latin-1", "replace")
    if kind == "utf16":
        return text.encode("utf-16")
    if kind == "utf32":
        return text.encode("utf-32")
    if kind == "truncated":
        return ("a: " + text).encode()[:-1] + b"\xc3"
    data = bytearray(draw(st.binary(max_size=200)))
    data.insert(draw(st.integers(0, len(data))), draw(st.sampled_from([0xFF, 0xFE, 0xC0, 0x80, 0xED])))
    return bytes(data)


def long_name(n: int, ch: str = "a") -> str:
    return ch * n


LONG_COMPONENT = st.integers(256, 2_000).flatmap(lambda n: st.sampled_from("ab_é-").map(lambda c: long_name(n, c)))


@st.composite
def long_path(draw, base: str = "/tmp") -> str:
    """A path one of whose components is longer than NAME_MAX (255 bytes), sometimes in the middle."""
    comp = draw(LONG_COMPONENT)
    where = draw(st.sampled_from(["last", "middle"]))
    suffix = draw(st.sampled_from(["", ".json", ".yaml", ".csv", ".parquet"]))
    return f"{base}/{comp}/x{suffix}" if where == "middle" else f"{base}/{comp}{suffix}"


UNCREATABLE_DIRS = st.sampled_from(["/proc", "/proc/self", "/proc/1", "/sys", "/sys/kernel", "/proc/self/fd"])


@st.composite
def uncreatable_output(draw) -> str:
    """A path in a folder where no file can be created (pseudo file systems)."""
    name = draw(st.text(alphabet="abcdefghij_", min_size=1, max_size=12))
    return f"{draw(UNCREATABLE_DIRS)}/{name}{draw(st.sampled_from(['', '.json', '.parquet']))}"


@st.composite
def bad_scheduler_address(draw) -> str:
    """A scheduler address that cannot be one: bad scheme, port, brackets, host or characters."""
    host = draw(st.sampled_from(["127.0.0.1", "localhost", "[::1]", "::1", "[::1", "::1]", "", "a b", "é", "..",
                                 "-x", "[zz::1]x"]))
    port = draw(st.one_of(st.sampled_from(["", ":", ":0", ":65536", ":-1", ":x", ":8786:1", ":1e3", ": 8786"]),
                          st.integers(65_536, 10**30).map(lambda p: f":{p}")))
    scheme = draw(st.sampled_from(["tcp://", "tls://", "foo://", "http://", "://", "tcp:/", "ucx://", "inproc://",
                                   "TCP://", ""]))
    addr = scheme + host + port
    good_scheme = scheme.lower() in ("tcp://", "tls://", "")
    good_host = host in ("127.0.0.1", "localhost", "[::1]")
    good_port = port == "" or (port[1:].isdigit() and 1 <= int(port[1:]) <= 65535)
    if good_scheme and good_host and good_port:  # drawn a valid address by chance: break it
        addr += draw(st.sampled_from(["]", ":x", "\x00", " y"]))
    return addr


def config_type_errors():
    """(field, wrong value) for the config.json fields whose type is checked: true/false and text."""
    from lpxsim.specs.config_parse import BOOL_FIELDS, STR_FIELDS

    wrong_bool = st.one_of(st.sampled_from(["yes", "no", "true", "false", "1", "", "on"]), st.integers(-3, 3),
                           st.floats(allow_nan=True), st.lists(st.booleans(), max_size=2),
                           st.dictionaries(st.text(max_size=2), st.booleans(), max_size=1))
    wrong_str = st.one_of(st.integers(), st.floats(allow_nan=True), st.booleans(), st.lists(st.text(max_size=3), max_size=2),
                          st.dictionaries(st.text(max_size=2), st.integers(), max_size=1))
    return st.one_of(st.tuples(st.sampled_from(BOOL_FIELDS), wrong_bool),
                     st.tuples(st.sampled_from(STR_FIELDS), wrong_str))
