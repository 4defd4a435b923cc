"""Multi-token prediction (MTP): a model's own draft head, and its default acceptance.

A model that ships MTP modules (DeepSeek-V3/R1: `num_nextn_predict_layers`)
drafts with them inside the engine; each round verifies k + 1 positions. The
acceptance rate is a parameter; its default per model is what the model's
authors report: DeepSeek-V3 technical report (arXiv 2412.19437, section 5.4.3)
gives 85-90 % acceptance of the second predicted token; the lower end is taken
(docs/sources.md "DSV3-MTP"). A model without MTP modules has no default: the
caller must give one.
"""

from __future__ import annotations

from lpxsim.core.errors import UserError
from lpxsim.specs.model import ModelSpec

# model family (lower-case name prefix) -> per-token acceptance of the MTP draft, and its source
DEFAULT_ACCEPT: dict[str, tuple[float, str]] = {
    "deepseek-v3": (0.85, "DSV3-MTP"),
    "deepseek-r1": (0.85, "DSV3-MTP"),  # same architecture and MTP module as DeepSeek-V3
}


def has_mtp(model: ModelSpec) -> bool:
    return model.mtp_layers > 0


def default_accept(model: ModelSpec) -> float:
    """The sourced default MTP acceptance of `model`; UserError naming `accept` when there is none."""
    name = model.name.lower()
    for prefix, (a, _src) in DEFAULT_ACCEPT.items():
        if name.startswith(prefix):
            return a
    why = "has no MTP head" if not has_mtp(model) else "has no published MTP acceptance"
    raise UserError("accept", f"{model.name} {why}; give --accept for its draft acceptance rate")
