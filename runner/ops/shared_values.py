"""A value that a case's reference and its bound both compute from the same float64 inputs, computed once.

runner.run computes the reference, then the bound, each from the same input tensors; an op whose bound
needs an expensive value of its reference (attention's softmax rows, a fused chain's exact first
product) asks for it here. The last value of each kind is kept while its inputs live (a finaliser on
each input drops it; a new value of the kind detaches the old one's, so they do not pile up) and none
of them has changed in place, so a later case, or the same tensors after an in-place change, never sees
it. "Changed" is torch's version counter: writes that bypass it (through a numpy view, or `.data =`)
are not seen, and the runner makes none to its float64 inputs. Callers must not change a value they get
in place: the next caller gets the same object.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping, TypeVar

import torch

T = TypeVar("T")


@dataclass
class _Kept:
    key: tuple
    value: Any
    finalizers: list


_last: dict[str, _Kept] = {}
_lock = threading.Lock()  # finalisers run in whichever thread frees an input


def computed_once(kind: str, params: Hashable, inputs64: Mapping[str, torch.Tensor], compute: Callable[[], T]) -> T:
    """compute(), or the value it gave for the same kind, parameters and input tensors."""
    key = (params, tuple((name, id(t), t._version) for name, t in inputs64.items()))
    with _lock:
        kept = _last.get(kind)
        if kept is not None and kept.key == key:
            return kept.value
    value = compute()
    # the value may hold an input itself (attention's V): a finaliser, not a reference, ties it to the inputs
    finalizers = [weakref.finalize(tensor, _forget, kind, key) for tensor in inputs64.values()]
    with _lock:
        replaced = _last.get(kind)
        _last[kind] = _Kept(key, value, finalizers)
    if replaced is not None:
        for finalizer in replaced.finalizers:
            finalizer.detach()
    return value


def _forget(kind: str, key: tuple) -> None:
    with _lock:
        kept = _last.get(kind)
        if kept is not None and kept.key == key:
            del _last[kind]
