"""Notices: things a user should know that are not errors (a slower path taken), given once.

A notice is a warning of category Notice, so pytest lists it in its warnings summary and `-W ignore::...`
can silence it; the `e2egen` command prints it as a plain `note: ...` line (`format_notices`).
A leaf module (standard library only): the CLI installs the format without importing torch.
"""
from __future__ import annotations

import warnings

_given: set[str] = set()


class Notice(UserWarning):
    """Something the user should know, with what to do about it; never a failure."""


def notify_once(key: str, message: str) -> None:
    """Give `message` as a Notice the first time `key` is asked for in this process; never raises (-W error)."""
    if key in _given:
        return
    _given.add(key)
    try:
        warnings.warn(message, Notice, stacklevel=3)
    except Notice:  # warnings turned into errors: a notice must not fail the comparison that gave it
        pass


def format_notices() -> None:
    """Print notices as `note: MESSAGE` lines rather than as Python warnings with their source line."""
    plain = warnings.formatwarning

    def format_warning(message, category, filename, lineno, line=None):
        if isinstance(category, type) and issubclass(category, Notice):
            return f"note: {message}\n"
        return plain(message, category, filename, lineno, line)

    warnings.formatwarning = format_warning
