"""The LPX backend: compile a model onto LPUs (partition, place, route, schedule, verify) and time it.

- `compile_program(model, system, racks=|chips=, context=, concurrency=, layout=, chip_sram_bytes=)`
  -> `CompileResult` (`.program`, `.report`, `.timing`, `.layout`); one step.
- `deployment_layout(model, system, phases=, ...)` -> the one `Layout` all of a deployment's steps share.
- `LpxStepModel(model, system="lpx", racks=|chips=, weights=, kv=, kv_layout=, layout=, context=)`
  implements `lpxsim.step.protocol.StepModel`.
"""

from lpxsim.lpu.compiler import CompileResult, compile_program, deployment_layout
from lpxsim.lpu.layout import Layout
from lpxsim.lpu.program import Program
from lpxsim.lpu.stepmodel import LpxStepModel
from lpxsim.lpu.verify import VerifyReport, verify

__all__ = ["CompileResult", "Layout", "LpxStepModel", "Program", "VerifyReport", "compile_program", "deployment_layout",
           "verify"]
