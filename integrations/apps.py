from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "integrations"
    verbose_name = "Integrations"

    def ready(self) -> None:
        from integrations import (
            checks,  # noqa: F401  (registers the system checks)
            handlers,
        )
        from integrations.application import delivery_jobs  # noqa: F401  (webhook_delivery, send_email)
        from jobs.public.schedules import builtin_schedule

        builtin_schedule("relay.purge_inbound_sms", cron="41 3 * * *", handler=handlers.PURGE_INBOUND_SMS_HANDLER)
