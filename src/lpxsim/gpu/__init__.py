"""GPU backend: op-level roofline with fitted efficiencies, kernel overheads and alpha-beta collectives."""

from lpxsim.gpu.collectives import Fabric, fabric_for, scale_out_fabric, scale_up_fabric
from lpxsim.gpu.layout import Layout
from lpxsim.gpu.params import GpuParams, fitted_params
from lpxsim.gpu.search import LayoutChoice, best_layout, search_layouts
from lpxsim.gpu.step import GpuStepModel

__all__ = [
    "Fabric",
    "GpuParams",
    "GpuStepModel",
    "Layout",
    "LayoutChoice",
    "best_layout",
    "fabric_for",
    "fitted_params",
    "scale_out_fabric",
    "scale_up_fabric",
    "search_layouts",
]
