"""User errors: one base class, reported by the CLI as `error: ...` lines, exit status 2, no traceback.

A leaf module (standard library only), so every layer can raise these:
- runner: `ProblemError`, `ImplError` (also ValueErrors)
- generator: `CatalogueError` (one line per problem found), `FilterError`
- nightly: `NightlyError`
- the CLI's commands: `UsageError`
"""
from __future__ import annotations

import difflib
from typing import Any, Iterable


class UserError(Exception):
    """Something the user gave is wrong: where, which key, the bad value, the valid choices, what is wrong.

    where: a file:line location or a key path, as text; key: the key, option
    or parameter at fault; value: what was given; choices: the valid values
    when there is a closed set, else None; message: the explanation without
    `where` and `key`, so callers can put their own context in front.
    """

    def __init__(self, message: str, *, where: str | None = None, key: str | None = None, value: Any = None,
                 choices: Iterable[Any] | None = None):
        self.where = where
        self.key = key
        self.value = value
        self.message = message
        self.choices = tuple(choices) if choices is not None else None
        super().__init__(str(self))

    def __str__(self) -> str:
        """One line: "where: key: message", with the parts that exist."""
        return ": ".join(str(part) for part in (self.where, self.key, self.message) if part)

    def lines(self) -> list[str]:
        """The lines to print, one per problem."""
        return [str(self)]


class UsageError(UserError):
    """A bad argument found after parsing (unknown case id, a file that cannot be written, options that clash)."""


def closest(value: object, choices: Iterable[object]) -> str | None:
    """The choice nearest to `value` when it is a near miss (a typo), else None."""
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.6)
    return close[0] if close else None
