"""Public URLs of integrations (no login): unsubscribe links and provider webhooks."""

from django.urls import path

from integrations.api import views

app_name = "integrations"

urlpatterns = [
    path("unsubscribe/<str:token>/", views.unsubscribe, name="unsubscribe"),
    path("hooks/twilio/sms/", views.twilio_inbound_sms, name="twilio-inbound-sms"),
]
