"""What a kernel under test may not leave behind: the process's global state, and its inputs.

Global state (issue 46): the run's state is snapshot once, the first time a case starts (`run_state`); every case
starts from it (`start_case`), and every kernel call (runs, probes, timing: `kernel_isolation`, which
runner.kernels.call_kernel and runner.run's timing use) compares the state after the kernel with the state before
it, puts back what the kernel changed and notes it, so that the case's report can say "the kernel changed global
state: flush-to-zero on, default dtype float64; restored" (`changes_noted`).

What is watched: deterministic algorithms, the default dtype and device, grad and anomaly mode, torch's thread
count, flush-to-zero (torch.set_flush_denormal), the float32 matmul precision in both of torch's APIs (legacy
allow_tf32 / set_float32_matmul_precision and the new fp32_precision switches; a mix of the two is put back
through both), cuDNN's switches, numpy's error handling, the working directory and the environment variables.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from e2egen.runner.safe_text import safe_text

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy ships with torch's usual installs
    _np = None


# -- global state ------------------------------------------------------------------------------------------------
_B = torch.backends
# torch's new float32-precision switches (read always; the legacy getters raise once the two APIs are mixed)
_PRECISION_SWITCHES: tuple[tuple[str, Any], ...] = tuple(
    (name, holder) for name, holder in (
        ("fp32_precision", _B), ("cuda.matmul.fp32_precision", getattr(_B.cuda, "matmul", None)),
        ("cudnn.fp32_precision", _B.cudnn), ("cudnn.conv.fp32_precision", getattr(_B.cudnn, "conv", None)),
        ("cudnn.rnn.fp32_precision", getattr(_B.cudnn, "rnn", None)), ("mkldnn.fp32_precision", _B.mkldnn),
        ("mkldnn.matmul.fp32_precision", getattr(_B.mkldnn, "matmul", None)),
        ("mkldnn.conv.fp32_precision", getattr(_B.mkldnn, "conv", None)),
        ("mkldnn.rnn.fp32_precision", getattr(_B.mkldnn, "rnn", None)))
    if holder is not None and hasattr(holder, "fp32_precision"))
_MIXED = "(legacy and new APIs mixed)"


def _read(getter: Callable[[], Any]) -> Any:
    try:
        return getter()
    except Exception:  # torch refuses to read a legacy switch once the new API set it differently
        return _MIXED


def flushes_subnormals() -> bool:
    """Whether this thread flushes subnormals (torch.set_flush_denormal(True)): 1e-39 * 1 gives 0."""
    return torch.full((1,), 1e-39, dtype=torch.float32, device="cpu").mul(1.0).item() == 0.0


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the kernel removed the directory
        return None


# (name as a report says it, how to read it, how to put it back, how to describe a value)
_Entry = tuple[str, Callable[[], Any], Callable[[Any], None], Callable[[Any], str]]


def _set_matmul(values: tuple) -> None:
    legacy_mm, legacy_cudnn, precision, fp16, bf16, new = values
    for value, put in ((legacy_mm, lambda v: setattr(_B.cuda.matmul, "allow_tf32", v)),
                       (legacy_cudnn, lambda v: setattr(_B.cudnn, "allow_tf32", v)),
                       (precision, torch.set_float32_matmul_precision),
                       (fp16, lambda v: setattr(_B.cuda.matmul, "allow_fp16_reduced_precision_reduction", v)),
                       (bf16, lambda v: setattr(_B.cuda.matmul, "allow_bf16_reduced_precision_reduction", v))):
        if value != _MIXED:
            try:
                put(value)
            except Exception:
                pass
    for (name, holder), value in zip(_PRECISION_SWITCHES, new):  # the new API last: it is what torch reads
        if getattr(holder, "fp32_precision") != value:
            setattr(holder, "fp32_precision", value)


def _matmul() -> tuple:
    return (_read(lambda: _B.cuda.matmul.allow_tf32), _read(lambda: _B.cudnn.allow_tf32),
            _read(torch.get_float32_matmul_precision),
            _read(lambda: _B.cuda.matmul.allow_fp16_reduced_precision_reduction),
            _read(lambda: _B.cuda.matmul.allow_bf16_reduced_precision_reduction),
            tuple(getattr(holder, "fp32_precision") for _, holder in _PRECISION_SWITCHES))


def _describe_matmul(values: tuple, before: tuple) -> str:
    names = ("cuda.matmul.allow_tf32", "cudnn.allow_tf32", "float32_matmul_precision",
             "cuda.matmul.allow_fp16_reduced_precision_reduction", "cuda.matmul.allow_bf16_reduced_precision_reduction")
    pairs = list(zip(names, values[:5], before[:5])) + [
        (n, v, w) for (n, _), v, w in zip(_PRECISION_SWITCHES, values[5], before[5])]
    return ", ".join(f"{n}={v}" for n, v, w in pairs if v != w)


def _set_deterministic(value: tuple[bool, bool]) -> None:
    torch.use_deterministic_algorithms(value[0], warn_only=value[1])


def _set_environ(saved: dict[str, str]) -> None:
    for name in [n for n in os.environ if n not in saved]:
        del os.environ[name]
    for name, value in saved.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def _describe_environ(now: dict[str, str], before: dict[str, str]) -> str:
    return ", ".join(sorted(n for n in set(now) | set(before) if now.get(n) != before.get(n)))


def _set_cwd(path: str | None) -> None:
    if path is not None:
        os.chdir(path)


def _set_default_device(device: Any) -> None:
    torch.set_default_device(None if str(device) == "cpu" else device)  # None: no device mode left installed


def _set_cudnn(values: tuple[bool, bool, bool]) -> None:
    _B.cudnn.enabled, _B.cudnn.benchmark, _B.cudnn.deterministic = values


_ENTRIES: tuple[_Entry, ...] = (
    ("flush-to-zero", flushes_subnormals, torch.set_flush_denormal, lambda v: "on" if v else "off"),
    ("default dtype", torch.get_default_dtype, torch.set_default_dtype, lambda v: str(v).removeprefix("torch.")),
    ("default device", lambda: torch.get_default_device(), _set_default_device, str),
    ("deterministic algorithms", lambda: (torch.are_deterministic_algorithms_enabled(),
                                          torch.is_deterministic_algorithms_warn_only_enabled()),
     _set_deterministic, lambda v: ("on" + (" (warn only)" if v[1] else "")) if v[0] else "off"),
    ("float32 matmul precision", _matmul, _set_matmul, _describe_matmul),
    ("cudnn switches", lambda: (_B.cudnn.enabled, _B.cudnn.benchmark, _B.cudnn.deterministic), _set_cudnn,
     lambda v: f"enabled={v[0]}, benchmark={v[1]}, deterministic={v[2]}"),
    ("grad mode", torch.is_grad_enabled, torch.set_grad_enabled, lambda v: "on" if v else "off"),
    ("anomaly detection", torch.is_anomaly_enabled, torch.set_anomaly_enabled, lambda v: "on" if v else "off"),
    ("torch threads", torch.get_num_threads, torch.set_num_threads, str),
    ("working directory", _cwd, _set_cwd, lambda v: repr(v) if v is not None else "removed"),
    ("environment variables", lambda: dict(os.environ), _set_environ, _describe_environ),
) + ((("numpy error handling", lambda: dict(_np.geterr()), lambda v: _np.seterr(**v),
       lambda v: ", ".join(f"{k}={x}" for k, x in sorted(v.items()))),) if _np is not None else ())

_DIFFS = (_describe_matmul, _describe_environ)  # these say what differs from the state put back
State = tuple[Any, ...]


def snapshot() -> State:
    return tuple(_read(read) for _, read, _, _ in _ENTRIES)


def restore(state: State, skip: tuple[str, ...] = ()) -> list[str]:
    """Put `state` back; what differed, as "default dtype float64" (the value the kernel left)."""
    changed = []
    for (name, read, put, describe), value in zip(_ENTRIES, state):
        if name in skip:
            continue
        now = _read(read)
        if now == value:
            continue
        described = describe(now, value) if describe in _DIFFS else describe(now)
        changed.append(f"{name} {safe_text(described)}")
        try:
            put(value)
        except Exception as err:  # put back what can be; say what could not
            changed[-1] += f" (could not restore: {type(err).__name__})"
    return changed


_run_state: State | None = None
_noted: list[str] = []


def run_state() -> State:
    """The state the run began with: taken once, the first time it is asked for."""
    global _run_state
    if _run_state is None:
        _run_state = snapshot()
    return _run_state


# Not put back when a case starts (only after each kernel call): the harness and its callers set these
# themselves between cases (pytest's PYTEST_CURRENT_TEST, a test's chdir, a caller's no_grad or thread count).
_CALLER_OWNED = ("grad mode", "torch threads", "working directory", "environment variables")


def start_case() -> None:
    """A case starts: the run's initial numerics state is put back (whatever an earlier case, kernel or kernel
    module left), and the notes of the last case are cleared."""
    state = run_state()
    _noted.clear()
    restore(state, skip=_CALLER_OWNED)


def changes_noted() -> list[str]:
    """What the kernels called since the case started changed in the global state (each once, in order)."""
    return list(dict.fromkeys(_noted))


@contextmanager
def changes_during() -> Iterator[list[str]]:
    """What the kernels called inside the block changed in the global state (each put back after its call)."""
    start = len(_noted)
    changed: list[str] = []
    try:
        yield changed
    finally:
        changed.extend(dict.fromkeys(_noted[start:]))


def describe_changes(changes: list[str]) -> str:
    return "the kernel changed global state: " + ", ".join(changes) + "; restored" if changes else ""


@contextmanager
def kernel_isolation() -> Iterator[None]:
    """Around every call of a kernel: what the kernel changes in the global state is put back afterwards (to the
    state before the call, which the harness chose: tf32_mode's switches, say) and noted for the case's report."""
    run_state()
    before = snapshot()
    try:
        yield
    finally:
        _noted.extend(restore(before))
