"""A value that a case's reference and its bound both compute from the same float64 inputs, computed once.

runner.run computes the reference, then the bound, each from the same input tensors; an op whose bound
needs an expensive value of its reference (attention's softmax rows, a fused chain's exact first
product) asks for it here. The last value of each kind is kept while its inputs live (a finaliser on
each input drops it) and none of them has changed in place (their version counters are in the key), so
a later case, or the same tensors after an in-place change, never sees it. Callers must not change a value
they get in place: the next caller gets the same object.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Hashable, Mapping, TypeVar

import torch

T = TypeVar("T")
_last: dict[str, tuple[tuple, Any]] = {}


def computed_once(kind: str, params: Hashable, inputs64: Mapping[str, torch.Tensor], compute: Callable[[], T]) -> T:
    """compute(), or the value it gave for the same kind, parameters and input tensors."""
    key = (params, tuple((name, id(t), t._version) for name, t in inputs64.items()))
    kept = _last.get(kind)
    if kept is not None and kept[0] == key:
        return kept[1]
    value = compute()
    _last[kind] = (key, value)
    for tensor in inputs64.values():  # the value may hold an input itself (attention's V): no cycle keeps it
        weakref.finalize(tensor, _forget, kind, key)
    return value


def _forget(kind: str, key: tuple) -> None:
    kept = _last.get(kind)
    if kept is not None and kept[0] == key:
        del _last[kind]
