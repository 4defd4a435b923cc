"""Numeric formats for weights and KV, with their storage cost including block scales."""

from __future__ import annotations

from dataclasses import dataclass

from lpxsim.core.errors import UserError


@dataclass(frozen=True)
class Precision:
    """A storage format: bits per element plus any block-scale overhead.

    `bytes_per_element` includes the scale overhead, so weight bytes are simply
    elements x bytes_per_element.
    """

    name: str
    element_bits: float
    scale_bits: float = 0.0  # bits of scale per block
    block_size: int = 1  # elements sharing one scale
    compute_name: str = ""  # the peak-FLOP column this format runs at (bf16, fp8, fp4, int8)
    note: str = ""

    @property
    def bytes_per_element(self) -> float:
        overhead = self.scale_bits / self.block_size if self.block_size > 1 else 0.0
        return (self.element_bits + overhead) / 8.0

    @property
    def compute(self) -> str:
        return self.compute_name or self.name


PRECISIONS: dict[str, Precision] = {
    "bf16": Precision("bf16", 16, note="bfloat16"),
    "fp16": Precision("fp16", 16, compute_name="bf16", note="float16, same rate as bf16"),
    "fp8": Precision(
        "fp8", 8, note="FP8 E4M3; per-tensor or 128x128 block scales are <0.03% and not counted"
    ),
    "int8": Precision("int8", 8, note="per-channel scales not counted (<0.1%)"),
    "fp4": Precision(
        "fp4",
        4,
        scale_bits=8,
        block_size=16,
        note="NVFP4: E2M1 values with one FP8 (E4M3) scale per 16 elements = 4.5 bits/element",
    ),
    "mxfp4": Precision(
        "mxfp4",
        4,
        scale_bits=8,
        block_size=32,
        compute_name="fp4",
        note="OCP MXFP4: E2M1 values with one E8M0 scale per 32 elements = 4.25 bits/element",
    ),
}


def get_precision(name: str | Precision, field: str = "precision") -> Precision:
    """Look up a precision by name; a bad name is a UserError naming `field`."""
    if isinstance(name, Precision):
        return name
    key = str(name).strip().lower()
    if key not in PRECISIONS:
        raise UserError(field, f"unknown precision {name!r}; expected one of {', '.join(PRECISIONS)}")
    return PRECISIONS[key]
