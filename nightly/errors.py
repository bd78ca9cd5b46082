"""User errors of the nightly commands (bad --shard, unknown run id, unreadable store).

The CLI prints the message and exits 2 without a traceback (a NightlyError is a UserError).
"""
from e2egen.errors import UserError


class NightlyError(UserError):
    """A user error: the message says what was wrong and what would be valid."""


class StoreError(NightlyError):
    """A results store that cannot be used: damaged, another application's database, full disk, locked.

    The message names the file (and the run and case when one row is at fault).
    """


class RecordsError(NightlyError):
    """A records file (JSON lines) or a record that is not what a sweep writes: file:line and what is wrong."""


class RunBusy(NightlyError):
    """Another process is writing the run (one writer per run)."""
