"""User errors in a catalogue: collected, then reported together with exit status 2."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from e2egen.errors import UserError, closest


@dataclass(frozen=True)
class Location:
    """Where a value came from, for messages: `configs.toml:23`."""

    path: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the catalogue: where, which key, what, and what is allowed."""

    location: Location
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.key}: {self.message}" if self.key else f"{self.location}: {self.message}"


class CatalogueError(UserError):
    """The catalogue (or another user input) is invalid; carries every problem found."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            (only,) = self.problems
            super().__init__(only.message, where=str(only.location), key=only.key or None)
        else:
            super().__init__("\n".join(str(p) for p in self.problems))

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


def close_match(value: object, choices: Iterable[str]) -> str:
    """'; did you mean 'x'?' for a near miss, else ''."""
    near = closest(value, choices)
    return f"; did you mean {near!r}?" if near else ""


def did_you_mean(value: object, choices: Iterable[str]) -> str:
    """The near-miss hint, then the valid choices: "; did you mean 'x'? valid: x, y", "; valid: x, y", or
    "; none is defined" when there is no choice at all."""
    choices = sorted({str(c) for c in choices})
    if not choices:
        return "; none is defined"
    return f"{close_match(value, choices) or ';'} valid: {', '.join(choices)}"


def unknown(kind: str, value: object, choices: Iterable[str]) -> str:
    """The message for a value that is not among the valid choices."""
    return f"unknown {kind} {value!r}{did_you_mean(value, choices)}"
