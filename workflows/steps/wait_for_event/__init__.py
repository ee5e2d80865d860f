"""The `wait_for_event` step type: its config, executor, form and sentences (workflows/steps/registry.py)."""
