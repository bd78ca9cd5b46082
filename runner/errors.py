"""The runner's exceptions: what went wrong with a case, and whose fault it is.

- `ProblemError` / `ImplError`: the user described something invalid (a bad
  shape parameter, an unknown dtype, an impl that cannot be imported). They are
  `UserError`s (the CLI reports them, exit 2) and `ValueError`s, so callers
  that validate input can treat them alike.
- `Skip`: the device lacks a capability the case needs; the case is skipped
  with the reason, never failed.
- `KernelFailure`: the kernel under test raised, ran out of memory, or broke
  its contract (wrong shape, dtype or device). The case fails; the run goes on.
"""
from __future__ import annotations

from typing import Any, Iterable

from e2egen.errors import UserError, closest


def _choices_text(choices: Iterable[Any]) -> str:
    return ", ".join(str(c) for c in choices)


class ProblemError(UserError, ValueError):
    """An invalid problem description.

    key: the parameter (or axis: "op", "direction", "dtype", "layout",
    "input_range", "seed") at fault; value: what was given; message: the
    explanation without the key, so callers can prefix their own key path;
    choices: the valid values when there is a closed set, else None.
    """

    def __init__(self, key: str, value: Any, message: str, choices: Iterable[Any] | None = None):
        super().__init__(message, key=key, value=value, choices=choices)

    @classmethod
    def unknown(cls, key: str, value: Any, choices: Iterable[Any], what: str | None = None) -> "ProblemError":
        """An unknown name, with a did-you-mean hint and the valid choices."""
        choices = tuple(choices)
        near = closest(value, choices)
        hint = f" (did you mean {near!r}?)" if near else ""
        return cls(key, value, f"unknown {what or key} {value!r}{hint}; valid: {_choices_text(choices)}", choices)


class ImplError(UserError, ValueError):
    """A kernel implementation string that cannot be turned into a callable."""

    def __init__(self, impl: str, message: str):
        self.impl = impl
        super().__init__(message, key="impl", value=impl)

    def __str__(self) -> str:
        return ": ".join(part for part in (self.where, f"impl {self.impl!r}", self.message) if part)


class Skip(Exception):
    """The device lacks a capability this case needs; `reason` names it."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class KernelFailure(Exception):
    """The kernel under test failed this case; `reason` says how."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)
