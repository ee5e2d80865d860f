"""Email through Django's mailers (MAILERS, from EMAIL_URL): SMTP in production, console in development.

Every marketing email to a contact carries its own unsubscribe link and the
RFC 8058 one-click headers; SMTP's answers are mapped onto the queue's errors
(refused or timed-out connections and 4xx replies may pass; 5xx will not).
"""

from __future__ import annotations

import email.policy
import hashlib
import logging
import re
import smtplib
import ssl
from collections.abc import Callable
from email.utils import make_msgid, parseaddr
from html import escape
from typing import Protocol

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives, mailers
from django.core.validators import validate_email

from integrations.domain.channels import DeliveryResult, EmailMessage, OnAccepted, attach_failure_details
from integrations.domain.failures import failure_for_smtp_reply
from integrations.domain.sms import mask_email
from integrations.domain.tracking import EmailTracking, track_email
from kernel.failures import JobError, NetworkFailure, ServerFailure, TimeoutFailure, ValidationFailure

log = logging.getLogger("relay.integrations.email")

# Headers a step may not set: the envelope and the unsubscribe headers are Relay's.
RESERVED_HEADERS = frozenset(
    {"from", "to", "cc", "bcc", "subject", "list-unsubscribe", "list-unsubscribe-post", "message-id"}
)

# Given a contact id: the URL that unsubscribes that contact (see integrations.application.unsubscribe).
UnsubscribeUrl = Callable[[int], str]
# Given an account id: that account's From address, or "" for the default.
AccountSender = Callable[[int], str]


class TrackingLinks(Protocol):
    """The tracked addresses of an email's links and open pixel (integrations.application.tracking)."""

    def click_url(self, message: EmailMessage, tracking: EmailTracking, link: str) -> str | None: ...

    def open_url(self, message: EmailMessage, tracking: EmailTracking) -> str: ...


# RFC 5322 allows lines of 998 characters. Under the default 78, Python folds a long header it cannot break
# at a space (the List-Unsubscribe URL with its signed token) into RFC 2047 encoded words, which mailbox
# providers do not decode there: the one-click link would be lost.
class _RelayEmail(EmailMultiAlternatives):
    def message(self, *, policy=email.policy.default):
        # Backends choose the policy (SMTP's has CRLF line ends); only its line length changes.
        return super().message(policy=policy.clone(max_line_length=998))


class DjangoMailEmailChannel:
    """An EmailChannel over `django.core.mail.mailers` (MAILERS["default"], which EMAIL_URL configures)."""

    def __init__(
        self,
        *,
        unsubscribe_url: UnsubscribeUrl | None = None,
        account_sender: AccountSender | None = None,
        tracking_links: TrackingLinks | None = None,
        mailer_alias: str = "default",
    ) -> None:
        self._unsubscribe_url = unsubscribe_url
        self._account_sender = account_sender
        self._tracking_links = tracking_links
        self._alias = mailer_alias

    def send_email(self, message: EmailMessage, *, on_accepted: OnAccepted | None = None) -> DeliveryResult:
        """One message through the mailer. `on_accepted` hears of it once the server accepted it, before the
        session's QUIT (the ledger records it sent as early as that can be known); a QUIT that fails then
        changes nothing: the message was accepted."""
        to = self._recipient(message.to)
        subject = message.subject if isinstance(message.subject, str) else ""
        if not subject.strip():
            raise ValidationFailure("subject: must not be empty")
        if "\n" in subject or "\r" in subject:
            raise ValidationFailure("subject: must be on one line")
        if not (message.text or "").strip() and not (message.html or "").strip():
            raise ValidationFailure("text: an email needs a text or an HTML body")
        sender = self._sender(message)
        headers = self._headers(message.headers)
        text, html = message.text or "", message.html
        tracked_links = None
        tracking, links = message.tracking, self._tracking_links
        if tracking is not None and links is not None and message.contact_id is not None:
            # Before the unsubscribe footer: that link never goes through the click redirect.
            body = track_email(
                text, html, lambda url: links.click_url(message, tracking, url), links.open_url(message, tracking)
            )
            text, html, tracked_links = body.text, body.html, body.links
        unsubscribe = None
        if message.contact_id is not None and self._unsubscribe_url is not None:
            unsubscribe = self._unsubscribe_url(message.contact_id)
            headers["List-Unsubscribe"] = f"<{unsubscribe}>"
            headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
            text, html = with_unsubscribe_footer(text, html, unsubscribe)
        domain = parseaddr(sender)[1].rpartition("@")[2] or None
        message_id = stable_message_id(message.idempotency_key, domain) if message.idempotency_key else None
        message_id = message_id or make_msgid(domain=domain)
        headers["Message-ID"] = message_id

        mail = _RelayEmail(subject=subject, body=text, from_email=sender, to=[to], headers=headers)
        if html:
            mail.attach_alternative(html, "text/html")
        provider = _provider_name(self._alias)
        backend = mailers[self._alias]
        try:
            backend.open()  # held open across the send, so the session ends (QUIT) only after on_accepted
            backend.send_messages([mail])
        except Exception as exc:
            _close_quietly(backend)
            if isinstance(exc, JobError):
                raise
            error = classify_smtp_error(exc)
            attach_failure_details(error, {"provider": provider, "smtp_code": getattr(error, "smtp_code", None)})
            log.warning("email %s to %s failed: %s", message_id, mask_email(to), error)
            raise error from None
        result = DeliveryResult(
            channel="email",
            provider=provider,
            message_id=message_id,
            status="sent",
            details={
                "unsubscribe_link": unsubscribe is not None,
                **({"tracked": True, "tracked_links": tracked_links} if tracked_links is not None else {}),
            },
        )
        try:
            if on_accepted is not None:
                on_accepted(result)  # first: from the server's acceptance to here is the ledger's residual window
        finally:
            _close_quietly(backend)
        log.info("email %s to %s handed to %s", message_id, mask_email(to), provider)
        return result

    @staticmethod
    def _recipient(to: str) -> str:
        address = (to or "").strip() if isinstance(to, str) else ""
        try:
            validate_email(address)
        except ValidationError:
            raise ValidationFailure("to: not a valid email address") from None
        return address

    def _sender(self, message: EmailMessage) -> str:
        sender = message.from_email or ""
        if not sender and message.account_id is not None and self._account_sender is not None:
            sender = self._account_sender(message.account_id)
        sender = sender or settings.DEFAULT_FROM_EMAIL
        if "\n" in sender or "\r" in sender or not parseaddr(sender)[1]:
            raise ValidationFailure("from_email: not a valid sender address")
        return sender

    @staticmethod
    def _headers(given: dict[str, str] | None) -> dict[str, str]:
        headers: dict[str, str] = {}
        for name, value in (given or {}).items():
            if not isinstance(name, str) or not name or any(ch in name for ch in ": \r\n"):
                raise ValidationFailure("headers: a header name must be one word without a colon")
            if name.lower() in RESERVED_HEADERS:
                raise ValidationFailure(f"headers: {name} is set by Relay and cannot be given")
            if not isinstance(value, str) or "\n" in value or "\r" in value:
                raise ValidationFailure(f"headers: the value of {name} must be one line of text")
            headers[name] = value
        return headers


def with_unsubscribe_footer(text: str, html: str | None, url: str) -> tuple[str, str | None]:
    """Add the unsubscribe link to each part that does not already show it."""
    if url not in text:
        text = f"{text.rstrip()}\n\n--\nUnsubscribe: {url}\n"
    if html is not None and escape(url) not in html and url not in html:
        footer = f'<p style="font-size:12px;color:#666"><a href="{escape(url)}">Unsubscribe</a></p>'
        lowered = html.lower()
        at = lowered.rfind("</body>")
        html = f"{html[:at]}{footer}{html[at:]}" if at >= 0 else f"{html}{footer}"
    return text, html


def classify_smtp_error(exc: BaseException) -> JobError:
    """What an SMTP failure means for the queue. Messages carry codes and stages, never credentials."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _ in exc.recipients.values()]
        error = failure_for_smtp_reply(min(codes) if codes else 550, stage="RCPT TO")
        error.smtp_code = min(codes) if codes else None  # type: ignore[attr-defined]
        return error
    if isinstance(exc, smtplib.SMTPResponseException):
        stage = {
            smtplib.SMTPSenderRefused: "MAIL FROM",
            smtplib.SMTPDataError: "DATA",
            smtplib.SMTPConnectError: "connect",
            smtplib.SMTPHeloError: "HELO",
            smtplib.SMTPAuthenticationError: "AUTH",
        }.get(type(exc), "reply")
        error = failure_for_smtp_reply(exc.smtp_code, stage=stage)
        error.smtp_code = exc.smtp_code  # type: ignore[attr-defined]
        return error
    if isinstance(exc, smtplib.SMTPServerDisconnected):
        if "timed out" in str(exc):  # smtplib turns a read timeout into a disconnect
            return TimeoutFailure("SMTP server did not answer in time")
        return NetworkFailure("SMTP server closed the connection")
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        return ValidationFailure("SMTP server does not support a required extension (STARTTLS or AUTH)")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return NetworkFailure("SMTP server's TLS certificate did not verify")
    if isinstance(exc, ssl.SSLError):
        return NetworkFailure("TLS with the SMTP server failed")
    if isinstance(exc, TimeoutError):
        return TimeoutFailure("SMTP server did not answer in time")
    if isinstance(exc, ConnectionRefusedError):
        return NetworkFailure("SMTP server refused the connection")
    if isinstance(exc, OSError):
        return NetworkFailure(f"SMTP connection failed ({type(exc).__name__})")
    if isinstance(exc, smtplib.SMTPException):
        return ServerFailure(f"SMTP failed ({type(exc).__name__})")
    if isinstance(exc, ValueError):  # an address Django could not encode
        return ValidationFailure("an address could not be encoded for SMTP")
    return ServerFailure(f"email failed ({type(exc).__name__})")


def stable_message_id(key: str, domain: str | None) -> str:
    """The Message-ID of every attempt of one message: made from the ledger's key, so a message sent again
    after an unknown outcome carries the same id and a receiver that drops duplicates by Message-ID sees one.
    The key is used as it is when it is an RFC 5322 dot-atom of safe characters, else by its SHA-256."""
    local = key if _SAFE_ID.fullmatch(key) else hashlib.sha256(key.encode()).hexdigest()[:40]
    return f"<relay.{local}@{domain or 'relay.invalid'}>"


_SAFE_ID = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")


def _close_quietly(backend: object) -> None:
    """End the mailer's session; what fails here (a QUIT the server dropped) says nothing about the message."""
    try:
        backend.close()  # type: ignore[attr-defined]
    except Exception as exc:
        log.info("closing the mail session failed (%s); the message's outcome was already known", type(exc).__name__)


def _provider_name(alias: str) -> str:
    """smtp, console, locmem ...: the backend module's name, kept in the step's response data."""
    backend = str(getattr(settings, "MAILERS", {}).get(alias, {}).get("BACKEND", ""))
    parts = backend.split(".")
    return parts[-2] if len(parts) >= 2 else (backend or "unknown")
