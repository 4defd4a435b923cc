"""Every range printed in --help is the range enforced (issue 30: `emulate --steps` said 0..4,096 and
refused anything above 256; the documented max `--seed` was refused).

The ranges are read back from the help text of every option of every command, then each option's own
parser is given both ends (accepted) and the values just outside (refused).
"""

from __future__ import annotations

import re

import pytest
import typer

from lpxsim.cli.main import app, command  # noqa: F401  (importing `app` registers every command)

_RANGE = re.compile(r"\[(>?)([0-9][0-9.,eKM+]*)\.\.(<?)([0-9][0-9.,eKM+]*)")


def _number(text: str) -> float | int:
    text = text.replace(",", "")
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1], 1)
    text = text.rstrip("KM")
    value = float(text) * scale if ("." in text or "e" in text) else int(text) * scale
    return int(value) if float(value).is_integer() else value


def _parser(param):
    """The option's own value parser (typer keeps it on the option's parameter info)."""
    info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
    return getattr(info, "parser", None)


def _ranged_options() -> list[tuple[str, str, object, tuple]]:
    found = []

    def walk(cmd, path):
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())
        for p in getattr(cmd, "params", []):
            m = _RANGE.search(getattr(p, "help", None) or "")
            if m and _parser(p) is not None:
                found.append((path, p.opts[0], p, m.groups()))

    walk(command(), "")
    return found


RANGED = _ranged_options()


def test_the_ranged_options_are_found():
    names = {(c, o) for c, o, _, _ in RANGED}
    for expected in [("emulate", "--steps"), ("emulate", "--seed"), ("simulate", "--seed"), ("modes", "--seed"),
                     ("estimate", "--isl"), ("sweep", "--workers"), ("plan point", "--accept")]:
        assert expected in names, expected
    assert len(RANGED) > 40


def _accepts(param, value) -> bool:
    try:
        _parser(param)(str(value))
        return True
    except typer.BadParameter:
        return False


@pytest.mark.parametrize("cmd, opt, param, groups", RANGED, ids=[f"{c} {o}" for c, o, _, _ in RANGED])
def test_help_range_is_the_enforced_range(cmd, opt, param, groups):
    lo_open, lo_text, hi_open, hi_text = groups
    lo, hi = _number(lo_text), _number(hi_text)
    whole = param.metavar in ("N", "TOKENS")  # count options; real ones take any finite number in range
    step = 1 if whole else max(abs(hi), 1.0) * 1e-6
    if not lo_open:
        assert _accepts(param, lo), f"{cmd} {opt}: help says {lo} is allowed"
    assert not _accepts(param, lo - step if not lo_open else lo), f"{cmd} {opt}: below {lo} accepted"
    if not hi_open:
        assert _accepts(param, hi), f"{cmd} {opt}: help says {hi} is allowed"
    assert not _accepts(param, hi + step if not hi_open else hi), f"{cmd} {opt}: above {hi} accepted"


def test_emulate_steps_end_of_range_passes_the_emulator_check():
    """The parser's end and the emulator's own check are one constant."""
    from lpxsim.core.errors import UserError
    from lpxsim.core.inputs import EMULATE_STEPS_MAX
    from lpxsim.lpu.emulate.compare import validate_request

    validate_request(2, EMULATE_STEPS_MAX, 8)
    with pytest.raises(UserError, match="steps"):
        validate_request(2, EMULATE_STEPS_MAX + 1, 8)
