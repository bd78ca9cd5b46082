"""Kernels under test: torch's by default, or a team's own, named "pkg.module:function".

The contract (per op; tensors arrive on the device, in the case's dtype and
memory layout; stride, padding, dilation are tuples of ints):

    conv fwd         f(x, w, *, stride, padding, dilation, groups) -> y
    conv bwd_data    f(dy, w, *, input_shape, stride, padding, dilation, groups) -> dx
    conv bwd_weight  f(x, dy, *, weight_shape, stride, padding, dilation, groups) -> dw
    gemm             f(a, b) -> c            (batched when a and b are 3-d)

The result must be a tensor of the logical output shape (any memory layout),
in the output dtype (the case's dtype; f32 for tf32), on the same device.
An op with several outputs (Op.output_names) takes them as a tuple in that
order, or a mapping by name; each is checked the same way.
A kernel that raises (out of memory included) or breaks this is a
KernelFailure of that case; NaN or inf in its output is not: the metrics
judge values. An impl that cannot be imported is an ImplError.
"""
from __future__ import annotations

import importlib
import re
from typing import Any, Callable, Mapping

import torch

from .dtypes import storage_dtype
from .device import synchronize
from .errors import ImplError, KernelFailure, Skip
from .ops import Op
from .ops.base import named_outputs
from .problem import Problem, check_direction, lookup_op

TORCH_IMPL = "torch"
_IMPL_PATTERN = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
# How torch says an op has no kernel for a dtype/device: a missing capability, not a bug.
_NOT_IMPLEMENTED = re.compile(r"not implemented for|not supported|NotImplementedError|no kernel", re.IGNORECASE)


def resolve_impl(op: str | Op, direction: str, impl: str | None = None) -> Callable[..., Any]:
    """The kernel for (op, direction): torch's when impl is None or "torch", else the named callable."""
    spec = lookup_op(op)
    check_direction(spec, direction)
    if impl is None or impl == TORCH_IMPL:
        return spec.default_kernel(direction)
    if not isinstance(impl, str) or not _IMPL_PATTERN.fullmatch(impl):
        raise ImplError(str(impl), "expected 'package.module:function' (or \"torch\")")
    module_name, attribute_path = impl.split(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise ImplError(impl, f"cannot import module {module_name!r}: {err}") from err
    except Exception as err:  # the module itself is broken: say how
        raise ImplError(impl, f"importing module {module_name!r} raised {type(err).__name__}: {err}") from err
    for part in attribute_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as err:
            raise ImplError(impl, f"module {module_name!r} has no attribute {attribute_path!r}") from err
    if not callable(target):
        raise ImplError(impl, f"{attribute_path!r} is a {type(target).__name__}, not a callable")
    return target


def call_kernel(problem: Problem, kernel: Callable[..., Any], tensors: Mapping[str, torch.Tensor],
                device: torch.device, *, label: str, is_torch: bool) -> dict[str, torch.Tensor]:
    """Run the kernel once (waiting for the device) and check its outputs against the contract."""
    try:
        result = problem.spec.call(kernel, problem.direction, problem.params, tensors)
        synchronize(device)
    except torch.OutOfMemoryError as err:
        if device.type == "cuda":
            torch.cuda.empty_cache()
        raise KernelFailure(f"kernel {label} ran out of memory on {device}: {_first_line(err)}") from err
    except Exception as err:
        if is_torch and _NOT_IMPLEMENTED.search(f"{type(err).__name__}: {err}"):
            raise Skip(f"torch has no {device.type} kernel for {problem.op} {problem.direction} in "
                       f"{problem.dtype} ({problem.layout}): {_first_line(err)}") from err
        raise KernelFailure(f"kernel {label} raised {type(err).__name__}: {_first_line(err)}") from err
    outputs = named_outputs(problem.output_names, result, lambda text: KernelFailure(f"kernel {label} {text}"))
    for name, out in outputs.items():
        check_output(problem, out, device, label, name=name)
    return outputs


def check_output(problem: Problem, out: Any, device: torch.device, label: str, name: str | None = None) -> None:
    """One output (the primary one unless named) against its logical shape, format and device."""
    spec = problem.outputs[name or problem.primary_output]
    what = f"kernel {label} returned" if len(problem.outputs) == 1 else f"kernel {label} returned {name} as"
    if not isinstance(out, torch.Tensor):
        raise KernelFailure(f"{what} {type(out).__name__}, expected a torch.Tensor")
    if tuple(out.shape) != tuple(spec.shape):
        raise KernelFailure(f"{what} shape {tuple(out.shape)}, expected {tuple(spec.shape)}")
    expected_dtype = storage_dtype(spec.dtype)
    if out.dtype != expected_dtype:
        raise KernelFailure(f"{what} dtype {out.dtype}, expected {expected_dtype} ({spec.dtype})")
    if out.device != device:
        raise KernelFailure(f"{what} a tensor on {out.device}, expected {device}")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else repr(err)
