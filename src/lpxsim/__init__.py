"""lpxsim: a digital twin of the NVIDIA Groq 3 LPX rack and heterogeneous Vera Rubin + LPX serving.

Every number lpxsim prints traces back to a spec with a source, an assumption with its
reasoning (docs/assumptions.md), or a fitted parameter with the data it was fitted on.
"""

import os

# lpxsim's numpy work is on small arrays, where OpenBLAS's worker threads (started when numpy is imported, then
# spin-waiting) cost CPU and save none: ~0.1 s CPU of a 0.5 s cold GPU estimate (docs/benchmarks.md). Set before
# anything imports numpy; a value the user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
