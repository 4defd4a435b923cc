"""`plan point`'s question, asked of the engine's deployment search (`lpxsim.engine.search`).

The search, its candidates and its result types live in the engine's room; this module resolves the
planning layer's models (a catalog name, a config.json, or T8's synthetic 2T MoE) and re-exports the
names the planning layer and its callers use.
"""

from __future__ import annotations

from lpxsim.catalog import get_model
from lpxsim.engine.prefix import PrefixCachedStep  # noqa: F401  (re-exported)
from lpxsim.engine.search import (  # noqa: F401  (re-exported)
    ANALYTIC_REMOVED,
    MAX_CONCURRENCY,
    MAX_LPX_SIZES,
    MAX_REPLICA_SIZES,
    Candidate,
    OperatingPoint,
    Search,
    StepFactory,
    best_concurrency,
    check_backend,
    engine_factory,
    lpx_sizes,
    replica_layouts,
    wide_ep_layout,
)
from lpxsim.engine.search import operating_point as _search
from lpxsim.specs.model import ModelSpec


def plan_model(model: str | ModelSpec) -> ModelSpec:
    """A catalog model, a config.json path, or the synthetic 2T MoE of T8 (`synthetic-moe-2t`)."""
    if isinstance(model, str) and model.strip().lower() == "synthetic-moe-2t":
        from lpxsim.plan.t8 import synthetic_moe_2t  # lazy: t8 builds on this module

        return synthetic_moe_2t()
    return get_model(model)


def operating_point(model: str | ModelSpec, system: str, isl: int, osl: int, tok_s_user_target: float,
                    *args, **kw) -> OperatingPoint:
    """The most tok/s per MW one replica of `model` on `system` gives with every user at >= the target
    (`lpxsim.engine.search.operating_point`, whose keywords it takes)."""
    return _search(plan_model(model), system, isl, osl, tok_s_user_target, *args, **kw)
