from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"

    def ready(self) -> None:
        from contacts.application.events import subscribe
        from workflows import handlers  # noqa: F401 - registers workflow_step and workflow_resume
        from workflows.application.events import on_contact_event

        subscribe(on_contact_event)
