"""Wafer-scale backend (Cerebras CS-3 / CS-4): SRAM-resident weights, layers pipelined across wafers."""

from lpxsim.wse.stepmodel import WaferParams, WseStepModel, stream_elements

__all__ = ["WaferParams", "WseStepModel", "stream_elements"]
