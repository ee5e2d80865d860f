"""What went wrong in a job, classified once, and how it is written down.

Handlers raise these (integrations map HTTP, SMTP and provider answers onto
them); anything else is classified here by its Python type. The stored form
is `Type: message`, one line, at most 1,000 characters, with every URL cut
to scheme and host: no stack trace, no response body, no token in a path.
"""

import re
from dataclasses import dataclass
from enum import StrEnum

MAX_ERROR_LENGTH = 1000


class ErrorCategory(StrEnum):
    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    SERVER_ERROR = "server_error"
    NETWORK = "network"
    VALIDATION = "validation"
    AUTH = "auth"
    UNKNOWN = "unknown"


RETRYABLE_CATEGORIES = frozenset(
    {
        ErrorCategory.TIMEOUT,
        ErrorCategory.RATE_LIMIT,
        ErrorCategory.SERVER_ERROR,
        ErrorCategory.NETWORK,
        ErrorCategory.UNKNOWN,  # unclassified: assume it may pass
    }
)


class JobError(Exception):
    """Base of the errors a handler raises to say how its failure should be treated."""

    category: ErrorCategory = ErrorCategory.UNKNOWN


class RetryableError(JobError):
    """Failed for a passing reason; retry with backoff, or after `retry_after` seconds when the other side
    said when to come back (a Retry-After on a 429, and on a 503 or 408 too, as RFC 9110 allows)."""

    def __init__(self, message: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentError(JobError):
    """Will not get better by retrying: fail at once."""

    category = ErrorCategory.VALIDATION


class TimeoutFailure(RetryableError):
    category = ErrorCategory.TIMEOUT


class NetworkFailure(RetryableError):
    category = ErrorCategory.NETWORK


class ServerFailure(RetryableError):
    category = ErrorCategory.SERVER_ERROR


class RateLimited(RetryableError):
    """The other side asked us to slow down; its Retry-After wins over the backoff formula."""

    category = ErrorCategory.RATE_LIMIT

    def __init__(self, message: str = "rate limited", retry_after: float | None = None) -> None:
        super().__init__(message, retry_after)


class ValidationFailure(PermanentError):
    category = ErrorCategory.VALIDATION


class AuthFailure(PermanentError):
    category = ErrorCategory.AUTH


class JobTimeout(TimeoutFailure):
    """Raised inside a handler that outran JOB_EXECUTION_TIMEOUT."""


@dataclass(frozen=True)
class ClassifiedError:
    category: ErrorCategory
    retry_after: float | None
    message: str  # the stored form

    @property
    def retryable(self) -> bool:
        return self.category in RETRYABLE_CATEGORIES


def classify(exc: BaseException) -> ClassifiedError:
    """The one place that decides what kind of failure an exception is."""
    retry_after = None
    if isinstance(exc, JobError):
        category = exc.category
        if isinstance(exc, RetryableError):
            retry_after = exc.retry_after
    elif isinstance(exc, TimeoutError):  # socket.timeout is an alias
        category = ErrorCategory.TIMEOUT
    elif isinstance(exc, ConnectionError):
        category = ErrorCategory.NETWORK
    else:
        category = ErrorCategory.UNKNOWN
    return ClassifiedError(category=category, retry_after=retry_after, message=format_error(exc))


# scheme://[userinfo@]host[:port] followed by anything up to whitespace or a quote.
_URL = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]{0,15})://(?:[^\s/?#@'\"<>]*@)?([^\s/?#'\"<>]+)[^\s'\"<>]*")


# A path given without scheme and host after "url" (urllib3: "Max retries exceeded with url: /hook/T0/SECRET").
_BARE_PATH = re.compile(r"(\burl['\"]?\s*[:=]\s*['\"]?)/[^\s'\"<>]*", re.IGNORECASE)
# Whatever query string is left.
_QUERY = re.compile(r"\?[^\s'\"<>?]*=[^\s'\"<>]*")


def redact_urls(text: str) -> str:
    """Cut every URL to scheme and host: paths, queries and credentials often carry tokens."""
    text = _URL.sub(lambda m: f"{m.group(1)}://{m.group(2)}", text)
    text = _BARE_PATH.sub(lambda m: f"{m.group(1)}/…", text)
    return _QUERY.sub("?…", text)


# Where database drivers and Django's database layer define their errors.
_DATABASE_MODULES = ("django.db", "psycopg", "psycopg2", "sqlite3")
# What PostgreSQL text and jsonb cannot hold: NUL, and UTF-16 surrogates (never valid in text read as UTF-8).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """The text with NUL and surrogates replaced by U+FFFD: PostgreSQL refuses them in text and jsonb."""
    return _UNSTORABLE.sub("\ufffd", text)


def is_database_error(exc: BaseException) -> bool:
    """Raised by a database driver or Django's database layer (told by module: the domain imports neither)."""
    return any(cls.__module__.startswith(_DATABASE_MODULES) for cls in type(exc).__mro__)


def format_error(exc: BaseException) -> str:
    """`Type: message`, single line, URLs cut to scheme and host, at most 1,000 characters.

    A database error keeps only its first line: PostgreSQL's DETAIL and CONTEXT lines quote the
    row's data (`Key (email)=(...)`, `JSON data, line 1: ...`), which may be a response body or a secret.
    """
    text = str(exc)
    if is_database_error(exc):
        text = text.strip().split("\n", 1)[0]
    message = " ".join(storable_text(text).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return truncate(redact_urls(text))


def stored_error(text: str) -> str:
    """The stored-error rule applied again when an error is read: a row stored before a rule existed, or
    written by SQL, shows one line (its first: a DETAIL line quotes row data), URLs cut to scheme and host,
    at most 1,000 characters. What the rule already wrote comes back unchanged."""
    if not text:
        return text
    first = next((line for line in storable_text(text).splitlines() if line.strip()), "")
    return truncate(redact_urls(" ".join(first.split())))


def truncate(text: str, limit: int = MAX_ERROR_LENGTH) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


class LeaseLost(Exception):
    """This worker no longer holds the job: its lease passed and the job was rescued or re-run.

    Raised by JobContext.mark_completed so the handler's transaction rolls back
    instead of committing the effects of an attempt that no longer counts.
    `lost`: the jobs no longer held, when several were completed together (complete_all).
    """

    def __init__(self, message: str, lost: frozenset = frozenset()) -> None:
        super().__init__(message)
        self.lost = lost
