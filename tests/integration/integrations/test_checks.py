"""System checks catch a misconfigured channel before a step does."""

from integrations.checks import check_integrations


def ids(settings) -> set[str | None]:
    return {problem.id for problem in check_integrations()}


def test_the_defaults_pass(settings):
    settings.SMS_PROVIDER = "console"
    settings.VOICE_PROVIDER = ""
    settings.DEBUG = True  # the default outside tests; an http public URL only warns in production
    assert ids(settings) == set()


def test_an_unknown_provider(settings):
    settings.SMS_PROVIDER = "pigeon"
    assert "integrations.E001" in ids(settings)


def test_twilio_without_credentials(settings):
    settings.VOICE_PROVIDER = "twilio"
    settings.TWILIO_ACCOUNT_SID = ""
    (problem,) = [p for p in check_integrations() if p.id == "integrations.E002"]
    assert "TWILIO_ACCOUNT_SID" in problem.msg


def test_a_bad_allow_list_entry(settings):
    settings.WEBHOOK_ALLOWED_HOSTS = ["sink:notaport"]
    assert "integrations.E003" in ids(settings)


def test_the_public_url(settings):
    settings.RELAY_PUBLIC_URL = "relay.example"
    assert "integrations.E004" in ids(settings)
    settings.RELAY_PUBLIC_URL = "http://relay.example"
    settings.DEBUG = False
    assert "integrations.W001" in ids(settings)
