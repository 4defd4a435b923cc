"""Hardware as a planner reads it: racks (or nodes) and chips, not "32 vr-nvl72".

"32 vr-nvl72 + 256 lpx, 186 kW" (a fleet label, `lpxsim.bench.fleets.fleet_hardware`) reads
"1 Rubin rack (32 of 72 GPUs) + 1 LPX rack, 186 kW"; "lpx: 256 chips, 190.0 kW" (a step model's label,
`lpxsim.bench.backends.hardware_label`) reads "1 LPX rack, 190 kW". A label this module does not
recognise is returned unchanged: never a guess.
"""

from __future__ import annotations

import math
import re

from lpxsim.core.errors import UserError

# Short family names a planner uses; any other system reads as its catalog name.
SHORT = {"vr-nvl72": "Rubin", "lpx": "LPX", "gb200-nvl72": "GB200 NVL72", "gb300-nvl72": "GB300 NVL72",
         "h100-hgx": "H100", "h200-hgx": "H200", "b200-hgx": "B200", "b300-hgx": "B300", "cs-3": "CS-3",
         "cs-4": "CS-4", "helios": "Helios", "groq-v1": "GroqRack", "mi300x": "MI300X", "mi325x": "MI325X",
         "mi355x": "MI355X"}
_FLEET_PART = re.compile(r"^(\d+) (\S+)$")
_STEP = re.compile(r"^(?P<name>.+): (?P<chips>[\d,]+) chips, (?P<kw>[\d,.]+) kW$")
_CHIPS_X = re.compile(r"^(?P<chips>[\d,]+) x (?P<chip>.+?), (?P<kw>[\d,.]+) kW$")


def _chip_noun(system) -> str:
    if system.is_lpu:
        return "LPUs"
    return "wafers" if system.name.startswith("cs-") else "GPUs"


def racks_and_chips(system_name: str, chips: int) -> str:
    """'1 Rubin rack (32 of 72 GPUs)', '2 LPX racks', '1 H200 node (4 of 8 GPUs)'."""
    from lpxsim.catalog import get_system

    s = get_system(system_name)
    per = s.chips_per_unit
    units = max(1, math.ceil(chips / per))
    unit = s.unit_name + ("s" if units > 1 else "")
    head = f"{units:,} {SHORT.get(s.name, s.name)} {unit}"
    if chips == units * per:
        return head
    return f"{head} ({chips:,} of {units * per:,} {_chip_noun(s)})"


def _fleet(label: str) -> str | None:
    chips_text, _, power = label.rpartition(", ")
    parts = []
    for part in chips_text.split(" + "):
        m = _FLEET_PART.match(part.strip())
        if m is None:
            return None
        parts.append(racks_and_chips(m.group(2), int(m.group(1))))
    return " + ".join(parts) + (f", {_kw(power.removesuffix(' kW'))}" if power.endswith(" kW") else "")


NBSP = "\u00a0"  # between a number and its unit: a page never breaks "186 / kW"


def _kw(text: str) -> str:
    kw = float(text.replace(",", ""))
    return f"{kw:,.0f}{NBSP}kW" if kw >= 10 else f"{kw:,.1f}{NBSP}kW"


def _system_in(name: str) -> str | None:
    """The first word of a step model's name that is a catalog system ('gemma-4-31b on lpx (tp=..)': lpx)."""
    from lpxsim.catalog import system_names

    names = set(system_names())
    return next((w for w in re.split(r"[\s(),:]+", name) if w in names), None)


def _step(label: str) -> str | None:
    """'gemma-4-31b on lpx (tp=16,...): 256 chips, 97.0 kW' (the layout stays in the full data)."""
    m = _STEP.match(label)
    system = _system_in(m.group("name")) if m else None
    if m is None or system is None:
        return None
    return f"{racks_and_chips(system, int(m.group('chips').replace(',', '')))}, {_kw(m.group('kw'))}"


def _chips_x(label: str) -> str | None:
    """'256 x LP30, 97 kW': chips of the one catalog system whose chip has that name."""
    from lpxsim.catalog import get_system, system_names

    m = _CHIPS_X.match(label)
    if m is None:
        return None
    owners = [n for n in system_names() if get_system(n).chip.name == m.group("chip")]
    if len(owners) != 1:
        return None
    return f"{racks_and_chips(owners[0], int(m.group('chips').replace(',', '')))}, {_kw(m.group('kw'))}"


def hardware_words(label: str) -> str:
    """A hardware label in racks and chips (see the module doc); unchanged when not recognised."""
    if not isinstance(label, str) or not label:
        return label
    for parse in (_step, _chips_x, _fleet):
        try:
            words = parse(label)
        except (UserError, ValueError):  # not a catalog system: leave the label as it is
            words = None
        if words is not None:
            return words
    return label
