"""The functional emulator: a compiled LPX Program executed on numpy, checked against Hugging Face.

`ProgramExecutor` runs Programs chip by chip in cycle order; `GraphInterpreter`
runs the unsplit op graph (what the chips must add up to); `reference` builds
the Hugging Face model (torch and transformers are imported only there, lazily).
"""

from lpxsim.lpu.emulate.executor import ProgramExecutor, StepResult
from lpxsim.lpu.emulate.interpret import GraphInterpreter, KVCache
from lpxsim.lpu.emulate.state import EmulationError

__all__ = ["EmulationError", "GraphInterpreter", "KVCache", "ProgramExecutor", "StepResult"]
