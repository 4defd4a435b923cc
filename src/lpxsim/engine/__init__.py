"""The operating-point engine: one question (model, deployment, workload, load, objective), one answer.

`answer` (engine.answer) is what every command asks; `place` (engine.deployment) turns a deployment into a
replica's StepModel; `steady_state` prices one replica; `query` holds the question's parts.
"""
