"""Consent, the address and suppression: the rules that refuse. Consent is law."""

from __future__ import annotations

from collections.abc import Collection

from integrations.domain.sending.message import Channel, Outbound, Purpose
from integrations.domain.sending.verdicts import SEND, Refuse, Rule, Verdict

_ADDRESS_WORDS = {Channel.EMAIL: "email address", Channel.SMS: "phone number", Channel.VOICE: "phone number"}


def consent(message: Outbound) -> Verdict:
    """No marketing email to a contact who unsubscribed; no SMS and no call, whatever the purpose, to a number
    that opted out (a STOP covers every message of the sender, and SMS and calls share the number's opt-out).

    Unsubscribing is from marketing email: a transactional email (a receipt) still reaches the contact, as
    CAN-SPAM and every email service's transactional streams have it. A recipient who is no contact has
    given no consent to check. The contacts' own rule (ConsentState) says what each consent allows."""
    state = message.consent
    if state is None or message.purpose is Purpose.TEST:
        return SEND
    if message.channel is Channel.EMAIL:
        if message.purpose is Purpose.MARKETING and not state.allows_email():
            return Refuse("the contact unsubscribed from email", Rule.CONSENT, "unsubscribed")
        return SEND
    allows = state.allows_sms() if message.channel is Channel.SMS else state.allows_voice()
    if not allows:
        words = "SMS" if message.channel is Channel.SMS else "calls"
        return Refuse(f"the contact opted out of {words}", Rule.CONSENT, "sms_opted_out")
    return SEND


def address(message: Outbound) -> Verdict:
    """Nowhere to send is no failure to retry: the contact has no address for the channel."""
    if message.address.strip():
        return SEND
    return Refuse(f"the contact has no {_ADDRESS_WORDS[message.channel]}", Rule.ADDRESS, "no_address")


def suppression(message: Outbound, suppressed: Collection[str]) -> Verdict:
    """An address or number on the suppression list (hard bounces, complaints: filled by the deliverability
    work; here a list given in) gets nothing, whatever the purpose: mail to it hurts every other message."""
    if message.purpose is Purpose.TEST or not suppressed:
        return SEND
    spelled = message.address.strip()
    if spelled in suppressed or spelled.lower() in suppressed:  # entries are stored normalized (lower-case, E.164)
        return Refuse(
            f"the {_ADDRESS_WORDS[message.channel]} is on the suppression list", Rule.SUPPRESSION, "suppressed"
        )
    return SEND
