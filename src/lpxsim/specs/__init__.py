"""Specs: models (from Hugging Face config.json) and hardware (from the YAML catalog)."""
