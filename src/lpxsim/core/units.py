"""Unit constants. Inside lpxsim everything is SI base units; convert only at the edges."""

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 1024
MiB = 1024**2
GiB = 1024**3
US = 1e-6
NS = 1e-9
MW = 1e6
