"""A supported alias of the failure classes, kept for handlers written before they moved to `kernel.failures`.

New code imports them from `jobs.public` (the handler API); these are the very same classes and functions, so
`except jobs.domain.errors.PermanentError` and `except jobs.public.PermanentError` catch the same errors, and
the queue classifies both alike. Plain Python (the domain imports no Django), so importing it is always safe.
"""

from kernel.failures import (
    MAX_ERROR_LENGTH,
    RETRYABLE_CATEGORIES,
    AuthFailure,
    ClassifiedError,
    ErrorCategory,
    JobError,
    JobTimeout,
    LeaseLost,
    NetworkFailure,
    PermanentError,
    RateLimited,
    RetryableError,
    ServerFailure,
    TimeoutFailure,
    ValidationFailure,
    classify,
    format_error,
    is_database_error,
    redact_urls,
    storable_text,
    truncate,
)

__all__ = [
    "MAX_ERROR_LENGTH",
    "RETRYABLE_CATEGORIES",
    "AuthFailure",
    "ClassifiedError",
    "ErrorCategory",
    "JobError",
    "JobTimeout",
    "LeaseLost",
    "NetworkFailure",
    "PermanentError",
    "RateLimited",
    "RetryableError",
    "ServerFailure",
    "TimeoutFailure",
    "ValidationFailure",
    "classify",
    "format_error",
    "is_database_error",
    "redact_urls",
    "storable_text",
    "truncate",
]
