"""User errors of the nightly commands (bad --shard, unknown run id, unreadable store).

The CLI prints the message and exits 2 without a traceback (a NightlyError is a UserError).
"""
from e2egen.errors import UserError


class NightlyError(UserError):
    """A user error: the message says what was wrong and what would be valid."""
