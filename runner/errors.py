"""The runner's exceptions: what went wrong with a case, and whose fault it is.

- `ProblemError` / `ImplError`: the user described something invalid (a bad
  shape parameter, an unknown dtype, an impl that cannot be imported). They are
  `UserError`s (the CLI reports them, exit 2) and `ValueError`s, so callers
  that validate input can treat them alike.
- `Skip`: the device lacks a capability the case needs; the case is skipped
  with the reason, never failed.
- `KernelFailure`: the kernel under test raised, ran out of memory, or broke
  its contract (wrong shape, dtype or device). The case fails; the run goes on.
- `KernelDeclined`: public, raised *by* a kernel under test that cannot do a
  case (a dtype, direction, layout or shape it does not support); the runner
  turns it into a `Skip` with the kernel's reason, never a failure.
- `CaseTimedOut`: the case ran past its time limit. A BaseException, so that
  a kernel's `except Exception` cannot swallow it; the case fails with
  "timed out after N s".
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


class KernelDeclined(Exception):
    """Raised by a kernel under test that cannot do this case: `raise KernelDeclined("no f16 bwd_weight")`.

    The case is skipped (in `e2egen run`, pytest, nightly records and reports) with the kernel's reason;
    the reason should say what the kernel lacks.
    """

    def __init__(self, reason: str = ""):
        self.reason = str(reason).strip() or "no reason given"
        super().__init__(self.reason)


class CaseTimedOut(BaseException):
    """A case ran past its time limit of `seconds` (raised inside the running case by its timer)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(f"timed out after {format_seconds(seconds)} s")


def format_seconds(seconds: float) -> str:
    """600.0 -> "600", 0.5 -> "0.5": a time limit as a person would write it."""
    return f"{seconds:g}"


def belongs_to_the_harness(err: BaseException) -> bool:
    """Whether a BaseException that came out of a kernel call is the harness's own and must go on up: a case's
    time limit, pytest's skip/fail/exit (pytest-timeout's limit fails the test from inside the kernel's frame).
    Anything else a kernel raises, BaseException subclasses and GeneratorExit included, is the kernel's failure
    (KeyboardInterrupt and SystemExit are told apart where the kernel is called)."""
    # pytest's outcomes (Failed, Skipped, Exit) say they live in builtins; their base, OutcomeException, does not
    return isinstance(err, CaseTimedOut) or any(kind.__module__.split(".")[0] in ("_pytest", "pytest")
                                                for kind in type(err).__mro__)


def exception_text(err: BaseException) -> str:
    """str(err), whatever the exception does: one whose __str__ raises or returns a non-string is described by
    its type instead of breaking the report that names it."""
    try:
        text = str(err)
    except BaseException as broken:  # noqa: BLE001 - a kernel's exception class may do anything in __str__
        if belongs_to_the_harness(broken) or isinstance(broken, KeyboardInterrupt):
            raise
        return f"<unprintable {type(err).__name__}: its str() raised {type(broken).__name__}>"
    return text if isinstance(text, str) else f"<unprintable {type(err).__name__}>"
