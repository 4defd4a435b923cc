"""The LPX backend: compile a model onto LPUs (partition, place, route, schedule, verify) and time it."""
