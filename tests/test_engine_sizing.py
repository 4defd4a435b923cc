"""The engine sizes deployments by the capacity model's arithmetic (`backends.sizing`, kept below the engine and
the serving layer); this holds the two equal, so a change to one cannot leave the other behind silently."""

from __future__ import annotations

import pytest

from lpxsim.backends import sizing
from lpxsim.catalog import get_model, get_system
from lpxsim.engine.query import Deployment
from lpxsim.plan.capacity import capacity


@pytest.mark.parametrize("model", ["gemma-4-31b", "gpt-oss-120b", "llama-3.1-70b"])
@pytest.mark.parametrize("system", ["lpx", "vr-nvl72", "h200-hgx"])
@pytest.mark.parametrize("context", [10_256, 100_256])
def test_sizing_is_the_capacity_models_arithmetic(model, system, context) -> None:
    m, s = get_model(model), get_system(system)
    cap = capacity(m, s, context)
    assert sizing.units_needed(m, s, context) == cap.units_needed
    assert sizing.streams_that_fit(m, s, context, s.chips_per_unit) == cap.max_streams
    design = sizing.design_streams(m, s, context, s.chips_per_unit)
    assert design & (design - 1) == 0 and design <= max(1, cap.max_streams)


def test_a_deployment_label_states_chips_replicas_layout_and_power() -> None:
    rack = Deployment("lpx", 128, layout="tp=16,stages=8,kvsplit=4", replicas=2, given=True)
    assert rack.label() == "1 lpx rack (256 chips: 2 replicas x 128 chips, tp=16,stages=8,kvsplit=4), " \
                           f"{get_system('lpx').power(1) / 1e3:,.1f} kW"
    part = Deployment("lpx", 64)
    assert part.label().startswith("64 lpx chips (0.25 rack") and part.power_w == get_system("lpx").power(1) / 4
    assert Deployment("lpx", 100, idle_chips=28).powered_chips == 128
    # one replica smaller than the rack it is powered in names its size beside the idle chips
    one = Deployment("lpx", 160, layout="tp=16,stages=10,kvsplit=4", idle_chips=96)
    assert one.label().startswith("1 lpx rack (256 chips: 1 replica x 160 chips, 96 idle, tp=16,stages=10")
