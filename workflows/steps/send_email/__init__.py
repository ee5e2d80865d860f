"""The `send_email` step type: its config, executor, form and sentences (workflows/steps/registry.py)."""
