"""Public endpoints: the email unsubscribe page (RFC 8058 one-click), email tracking (`/t/o/`, `/t/c/`) and
the provider's inbound SMS webhook.

Neither takes a login: the unsubscribe link's signed token and the provider's
request signature are the credentials. Both are CSRF-exempt for that reason
(a mailbox provider's one-click POST and Twilio's POST carry no CSRF token).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotFound, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from integrations.application.inbound_sms import inbound_sms_receive
from integrations.application.tracking import read_token, record_click, record_open
from integrations.application.unsubscribe import (
    InvalidUnsubscribeToken,
    public_url,
    unsubscribe_by_token,
    unsubscribe_preview,
)
from integrations.domain.sms import mask_email
from integrations.infrastructure.twilio import signature_is_valid

log = logging.getLogger("relay.integrations.api")

# The smallest transparent GIF (1x1): the open pixel's answer.
PIXEL_GIF = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b")

EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'


@csrf_exempt
@never_cache
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    """GET: a confirmation page (changes nothing: link scanners prefetch). POST: unsubscribe, idempotently.

    The POST is either the page's button or a mailbox provider's one-click
    request (`List-Unsubscribe=One-Click` in the form body, RFC 8058); both
    answer 200 whether or not the contact was already unsubscribed.
    """
    try:
        if request.method == "POST":
            one_click = request.POST.get("List-Unsubscribe") == "One-Click"
            outcome = unsubscribe_by_token(token=token, one_click=one_click)
            return render(
                request,
                "integrations/unsubscribed.html",
                {"email": mask_email(outcome.email) if outcome.email else "", "changed": outcome.changed},
            )
        outcome = unsubscribe_preview(token=token)
    except InvalidUnsubscribeToken:
        return render(request, "integrations/unsubscribe_invalid.html", status=400)
    return render(
        request,
        "integrations/unsubscribe_confirm.html",
        {"email": mask_email(outcome.email) if outcome.email else "", "found": outcome.found},
    )


def _not_found() -> HttpResponse:
    """The same plain answer for a token that was altered, expired or never issued: it records nothing."""
    return HttpResponseNotFound("not found", content_type="text/plain")


@never_cache
@require_http_methods(["GET", "HEAD"])
def track_open(request: HttpRequest, token: str) -> HttpResponse:
    """The open pixel: records `email.opened` (once per run and step) and answers a transparent 1x1 GIF."""
    tracked = read_token(token, click=False)
    if tracked is None:
        return _not_found()
    if request.method == "GET":
        record_open(tracked)
    return HttpResponse(PIXEL_GIF, content_type="image/gif")


@never_cache
@require_http_methods(["GET", "HEAD"])
def track_click(request: HttpRequest, token: str) -> HttpResponse:
    """A tracked link: records `email.clicked` and redirects to the link signed in the token, nowhere else.

    HEAD (a link checker) redirects without recording.
    """
    tracked = read_token(token, click=True)
    if tracked is None:
        return _not_found()
    if request.method == "GET":
        record_click(tracked)
    return HttpResponseRedirect(tracked.link)


@csrf_exempt
@require_POST
def twilio_inbound_sms(request: HttpRequest) -> HttpResponse:
    """Twilio's webhook for incoming SMS: verified by X-Twilio-Signature, then STOP/START handled or the reply
    recorded on the contact whose conversation with `To` it continues."""
    auth_token = str(getattr(settings, "TWILIO_AUTH_TOKEN", "") or "")
    if not auth_token:
        return HttpResponse("inbound SMS is not configured", status=503, content_type="text/plain")
    params = {name: request.POST.getlist(name) for name in request.POST}
    urls = [public_url(request.get_full_path()), request.build_absolute_uri()]
    signature = request.headers.get("X-Twilio-Signature", "")
    if not signature_is_valid(auth_token=auth_token, signature=signature, urls=urls, params=params):
        log.warning("inbound sms refused: missing or invalid X-Twilio-Signature")
        return HttpResponse("invalid signature", status=403, content_type="text/plain")
    expected_sid = str(getattr(settings, "TWILIO_ACCOUNT_SID", "") or "")
    if expected_sid and request.POST.get("AccountSid", expected_sid) != expected_sid:
        return HttpResponse("wrong account", status=403, content_type="text/plain")
    inbound_sms_receive(
        from_number=request.POST.get("From", ""),
        body=request.POST.get("Body", ""),
        message_sid=request.POST.get("MessageSid", ""),
        to_number=request.POST.get("To", ""),
    )
    # No reply of our own: for STOP/START the provider sends the carrier-mandated confirmation.
    return HttpResponse(EMPTY_TWIML, content_type="text/xml")
