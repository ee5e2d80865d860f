"""The workflow builder's forms, widgets and error mapping (admin only).

A step is edited through a form made for its type, in the type's folder (`workflows/steps/<name>/form.py`,
looked up by name as `steps.STEP_FORMS`; docs/howto/add-a-step-type.md). Forms only gather what the marketer
typed into a step's config; every rule is the domain's (`workflows.domain`), whose errors come back by path
(`steps[2].config.url`) and are put next to the field that path names.
"""
