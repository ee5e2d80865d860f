"""The integrations' jobs on the queue."""

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from jobs.public import JobContext, job_handler

PURGE_INBOUND_SMS_HANDLER = "integrations.purge_inbound_sms"


@job_handler(PURGE_INBOUND_SMS_HANDLER)
def purge_inbound_sms(payload: dict[str, Any], job: JobContext) -> None:
    """Forget inbound message ids past INBOUND_SMS_REPLAY_WINDOW_DAYS: a replay older than that is let
    through (the provider's signature never expires), the table stays small."""
    from integrations.application.inbound_sms import forget_inbound_messages

    forget_inbound_messages(before=timezone.now() - timedelta(days=settings.INBOUND_SMS_REPLAY_WINDOW_DAYS))
