"""Foundations every layer may use: errors, units, input checks, the on-disk cache, data files, progress."""
