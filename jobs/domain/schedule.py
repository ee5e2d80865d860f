"""Cron ticks. A schedule fires once per tick; missed ticks (no worker ran) fire once, not in a burst."""

from datetime import datetime

from croniter import croniter


class InvalidCron(ValueError):
    pass


def validate_cron(expression: str) -> str:
    expression = " ".join(expression.split())
    if len(expression.split(" ")) != 5 or not croniter.is_valid(expression):
        raise InvalidCron(f"{expression!r} is not a five-field cron expression")
    return expression


def next_tick(expression: str, after: datetime) -> datetime:
    """The first tick strictly after `after` (aware datetimes, UTC)."""
    return croniter(validate_cron(expression), after).get_next(datetime)
