"""Tour section: the three heterogeneous serving modes (PD, AFD, external drafter) on an agentic workload.

Runs the serving simulator's shipped fleets against Rubin alone. Needs
`lpxsim.serving.simulate`; without it the section says the simulator is not in
this build.
"""

from __future__ import annotations

from lpxsim.report.tour_sections import SectionResult, TourConfig


def modes_section(cfg: TourConfig) -> SectionResult:
    from lpxsim.serving import simulate  # noqa: F401  (ImportError -> "not available in this build")

    raise ImportError("the tour's serving-modes section is not wired to lpxsim.serving.simulate yet")
