"""What a kernel under test may not leave behind: the process's global state, and its inputs.

Global state (issue 46): the run's state is snapshot once, the first time a case starts (`run_state`); every case
starts from it (`start_case`), and every kernel call (runs, probes, timing: `kernel_isolation`, which
runner.kernels.call_kernel and runner.run's timing use) compares the state after the kernel with the state before
it, puts back what the kernel changed and notes it, so that the case's report can say "the kernel changed global
state: flush-to-zero on, default dtype float64; restored" (`changes_noted`).

What is watched: deterministic algorithms, the default dtype and device, grad and anomaly mode, torch's thread
count, flush-to-zero (torch.set_flush_denormal), the float32 matmul precision in both of torch's APIs (legacy
allow_tf32 / set_float32_matmul_precision and the new fp32_precision switches; a mix of the two is put back
through both), cuDNN's switches, autocast, the recursion limit, the standard streams (which a kernel cannot
close either), the functions of torch, torch.Tensor, torch.nn.functional, torch.linalg/fft/special and numpy
(a kernel that patches torch.matmul must not reach the reference), the harness's entries in sys.modules,
numpy's error handling, the working directory and the environment variables.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from e2egen.runner.leftovers import note_kernel_threads, thread_idents
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


_AUTOCAST_DEVICES = ("cpu", "cuda")


def _autocast() -> tuple:
    return tuple((torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES)


def _set_autocast(values: tuple) -> None:
    for device, (enabled, dtype) in zip(_AUTOCAST_DEVICES, values):
        torch.set_autocast_enabled(device, enabled)
        torch.set_autocast_dtype(device, dtype)


def _describe_autocast(values: tuple) -> str:
    return ", ".join(f"{d} {'on' if on else 'off'} ({str(dtype).removeprefix('torch.')})"
                     for d, (on, dtype) in zip(_AUTOCAST_DEVICES, values))


def _streams() -> tuple:
    return sys.stdin, sys.stdout, sys.stderr


def _set_streams(values: tuple) -> None:
    sys.stdin, sys.stdout, sys.stderr = values


class Attributes:
    """The attributes of the namespaces the harness computes with (torch, torch.Tensor, torch.nn.functional,
    ..., numpy): a kernel that patches `torch.matmul` or `Tensor.__add__` would change the reference, the probes
    and every later case. Compared by identity. A name a kernel deleted, or replaced with something torch or numpy
    did not define, is a change; a name it added is one only where it hides what a class inherits
    (`Tensor.__add__` over TensorBase's). Importing a submodule (torch.compile loads torch._dynamo) adds names to
    its package and wraps some functions: that is torch's doing, and stays."""

    def __init__(self) -> None:
        self.saved = {name: dict(vars(space)) for name, space in _namespaces()}

    def changed(self, before: "Attributes") -> list[str]:
        return sorted(f"{space}.{key}" for space, key in self._changed_keys(before))

    def _changed_keys(self, before: "Attributes") -> list[tuple[str, str]]:
        spaces = dict(_namespaces())
        keys = []
        for space, now in self.saved.items():
            then = before.saved.get(space, {})
            keys += [(space, key) for key, value in then.items()
                     if now.get(key, _MISSING) is not value and not _libraries_own(now.get(key, _MISSING))]
            keys += [(space, key) for key in now.keys() - then.keys()
                     if _hides_inherited(spaces.get(space), key) and not _libraries_own(now[key])]
        return keys

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Attributes) and not self.changed(other)

    __hash__ = None  # type: ignore[assignment]


def _namespaces() -> list[tuple[str, Any]]:
    spaces = [("torch", torch), ("torch.Tensor", torch.Tensor), ("torch.nn.functional", torch.nn.functional),
              ("torch.linalg", torch.linalg), ("torch.fft", torch.fft), ("torch.special", torch.special)]
    return spaces + ([("numpy", _np)] if _np is not None else [])


def _libraries_own(value: Any) -> bool:
    """A value torch or numpy defined: what they put in place themselves (torch._dynamo, when a kernel's
    torch.compile loads it, wraps torch.manual_seed) is no kernel's patch."""
    module = getattr(value, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] in ("torch", "numpy")


def _hides_inherited(space: Any, key: str) -> bool:
    return isinstance(space, type) and any(key in vars(base) for base in space.__mro__[1:])


def _set_attributes(saved: Attributes) -> None:
    spaces = dict(_namespaces())
    for name, key in Attributes()._changed_keys(saved):
        space, then = spaces[name], saved.saved[name]
        if key in then:
            setattr(space, key, then[key])
        else:
            delattr(space, key)


def _describe_attributes(now: Attributes, before: Attributes) -> str:
    names = now.changed(before)
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


_MISSING = object()
_HARNESS_MODULES = ("e2egen", "torch", "numpy", "numba")


class Modules:
    """The harness's loaded modules (sys.modules entries of e2egen, torch, numpy, numba): a kernel that deletes
    or replaces one would break every later case. Modules a kernel imports are not a change."""

    def __init__(self) -> None:
        self.saved = {name: module for name, module in list(sys.modules.items())
                      if name.startswith(_HARNESS_MODULES)}  # a prefix (torchvision too): one C call per module

    def lost(self, before: "Modules") -> list[str]:
        return sorted(name for name, module in before.saved.items() if self.saved.get(name) is not module)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Modules) and not self.lost(other)

    __hash__ = None  # type: ignore[assignment]


def _set_modules(saved: Modules) -> None:
    for name, module in saved.saved.items():
        if sys.modules.get(name) is not module:
            sys.modules[name] = module


def _describe_modules(now: Modules, before: Modules) -> str:
    names = now.lost(before)
    return "removed or replaced: " + ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


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
    ("autocast", _autocast, _set_autocast, _describe_autocast),
    ("recursion limit", sys.getrecursionlimit, sys.setrecursionlimit, str),
    ("standard streams", _streams, _set_streams, lambda v: "replaced"),
    ("torch or numpy functions", Attributes, _set_attributes, _describe_attributes),
    ("harness modules", Modules, _set_modules, _describe_modules),
    ("working directory", _cwd, _set_cwd, lambda v: repr(v) if v is not None else "removed"),
    ("environment variables", lambda: dict(os.environ), _set_environ, _describe_environ),
) + ((("numpy error handling", lambda: dict(_np.geterr()), lambda v: _np.seterr(**v),
       lambda v: ", ".join(f"{k}={x}" for k, x in sorted(v.items()))),) if _np is not None else ())

_DIFFS = (_describe_matmul, _describe_environ, _describe_attributes, _describe_modules)  # these say what differs from the state put back
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
# Nor what pytest and tests swap in themselves: the captured streams, monkeypatched functions, reloaded modules.
_CALLER_OWNED = ("grad mode", "torch threads", "working directory", "environment variables", "standard streams",
                 "torch or numpy functions", "harness modules")


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


def guarded(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """`kernel`, called so that a recursion limit it lowers is put back in the frame that called it, before the
    harness makes another Python call (which the lowered limit would refuse, failing every later case); the
    change is noted like the others."""

    def call(*args: Any, **kwargs: Any) -> Any:
        limit = sys.getrecursionlimit()
        try:
            return kernel(*args, **kwargs)
        finally:
            lowered = sys.getrecursionlimit()
            if lowered != limit:
                sys.setrecursionlimit(limit)
                _noted.append(f"recursion limit {lowered}")

    return call


class _Unclosable:
    """The harness's stdout or stderr as a kernel sees it: everything passes through, but close() does nothing, so
    a kernel cannot close the stream pytest and the recorder write to."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def kernel_isolation() -> Iterator[None]:
    """Around every call of a kernel: what the kernel changes in the global state is put back afterwards (to the
    state before the call, which the harness chose: tf32_mode's switches, say) and noted for the case's report.
    A process the kernel forked that comes back here (its child returning from the kernel) ends at once: it would
    otherwise go on running the harness's cases and records beside its parent."""
    run_state()
    before = snapshot()
    threads_before = thread_idents()
    pid = os.getpid()
    streams = sys.stdout, sys.stderr
    guarded = tuple(_Unclosable(stream) if stream is not None else None for stream in streams)
    sys.stdout, sys.stderr = guarded
    try:
        yield
    finally:
        if os.getpid() != pid:
            os._exit(0)
        note_kernel_threads(thread_idents() - threads_before)
        for name, stream, guard in zip(("stdout", "stderr"), streams, guarded):
            if getattr(sys, name) is guard:  # not replaced by the kernel: the harness's own again
                setattr(sys, name, stream)
        _noted.extend(restore(before))
