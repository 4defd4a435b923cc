"""Planning: capacity ceilings, steady-state estimates, fleet sizing."""
