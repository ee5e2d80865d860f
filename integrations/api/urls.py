"""Public URLs of integrations (no login): unsubscribe links, email tracking and provider webhooks."""

from django.urls import path

from integrations.api import views

app_name = "integrations"

urlpatterns = [
    path("unsubscribe/<str:token>/", views.unsubscribe, name="unsubscribe"),
    path("t/o/<str:token>/", views.track_open, name="track-open"),
    path("t/c/<str:token>/", views.track_click, name="track-click"),
    path("hooks/twilio/sms/", views.twilio_inbound_sms, name="twilio-inbound-sms"),
]
