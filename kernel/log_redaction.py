"""No log line carries the row data a database error quotes.

PostgreSQL's DETAIL and CONTEXT lines quote the data it refused (`Key (email)=(...)`, `Failing row contains
(...)`, `JSON data, line 1: {...}`), and a driver's exception text holds them. The worker's own messages and
every stored error already keep only a database error's first line (`kernel.failures.format_error`); this
filter, on every handler in settings.LOGGING, does the same for tracebacks logged by anyone (Django's
"Internal Server Error" above all) and for database errors passed as a log message's arguments.
"""

from __future__ import annotations

import logging
import traceback

from kernel.failures import is_database_error

WITHHELD = "[details withheld: they may quote row data]"


def _chain(exc: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and all(exc is not e for e in seen):
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().split("\n", 1)[0]


class DatabaseDetailsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            detailed = [e for e in _chain(record.exc_info[1]) if is_database_error(e) and "\n" in str(e).strip()]
            if detailed:
                text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
                for exc in detailed:
                    text = text.replace(str(exc).strip(), f"{_first_line(exc)} {WITHHELD}")
                record.exc_text = text  # the formatter prints this instead of formatting the exception again
        if isinstance(record.args, tuple) and any(
            isinstance(a, BaseException) and is_database_error(a) for a in record.args
        ):
            record.args = tuple(
                f"{_first_line(a)} {WITHHELD}" if isinstance(a, BaseException) and is_database_error(a) else a
                for a in record.args
            )
        return True
