"""Backends above the seam: the StepModel factory (LPX, GPU, wafer), its on-disk memo, and AFD compositions."""
