"""The accounts app's domain error. Plain Python."""


class AccountError(ValueError):
    """An account, membership or token cannot be made as asked; `field` names what was wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
