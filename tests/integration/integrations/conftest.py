from tests.integration.integrations.fixtures import (  # noqa: F401 - pytest finds fixtures by name
    fake_twilio,
    http_sink,
    loopback_only,
    silent_listener,
    smtp_server,
    twilio_settings,
    webhook_settings,
)
