"""The operating-point engine: one answer to (model, deployment, workload, load, objective) -> metrics."""
