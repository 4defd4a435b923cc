"""The `lpxsim` command: a thin face over the Python API (parse, call, format)."""
