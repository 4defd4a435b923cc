"""How the public serving benchmark the project replays (InferenceX) runs its client: the lengths it draws.

InferenceX's client draws each request's input and output lengths uniform in [BENCHMARK_RANGE_RATIO, 1] x the
nominal ISL / OSL (`--random-range-ratio`; docs/assumptions.md, "Calibration data handling"), so a request's
mean length is LENGTH_RATIO x nominal. The GPU fit (`gpu.calibration`), the replay (`engine.validation`) and the
simulator's benchmark loop (`serving.workload.benchmark_loop`) all read it here.
"""

from __future__ import annotations

BENCHMARK_RANGE_RATIO = 0.8  # shortest drawn length / nominal length
LENGTH_RATIO = (1.0 + BENCHMARK_RANGE_RATIO) / 2.0  # mean drawn length / nominal length (0.9)
