"""The `wait` step type: its config, executor, form and sentences (workflows/steps/registry.py)."""
