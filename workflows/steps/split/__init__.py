"""The `split` step type: its config, executor, form and sentences (workflows/steps/registry.py)."""
