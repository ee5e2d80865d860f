"""The `send_sms` step type: its config, executor, form and sentences (workflows/steps/registry.py)."""
