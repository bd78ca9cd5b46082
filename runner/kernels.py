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

Where an impl's module is looked for: the catalogue's directory first, then
PYTHONPATH, then the installed packages (runner.import_path).

Declining a case: a kernel that cannot do a dtype, direction, layout or
shape raises `e2egen.runner.KernelDeclined(reason)` (importable without
torch from e2egen.runner.errors); the case is then skipped with
"kernel IMPL declined: REASON", never failed:

    from e2egen.runner import KernelDeclined

    def my_gemm(a, b):
        if a.dtype == torch.bfloat16:
            raise KernelDeclined("no bf16 path")
        ...

What a kernel must not do, and what it gets if it does: `SystemExit` and
`KeyboardInterrupt` raised by the kernel are failures of that case (a real
Ctrl-C, a SIGINT the process received while the kernel ran, still stops the
run); a kernel that ends its process (os._exit, abort, a segfault) fails
its case and the sweep goes on in a fresh process; a kernel that runs past
the case's time limit fails with "timed out after N s".

A kernel must not change the process's global state (default dtype or device,
deterministic algorithms, flush-to-zero, matmul precision, numpy's error
handling, the working directory, ...): what it changes is put back after each
call and named in the case's report (runner.isolation). It must not write
into its inputs nor return them or a view of them, and its outputs must be
dense (strided) tensors: each is a failure of the case that says so ("wrote
into its input a", "returned a view of input a", "returned a sparse
(sparse_coo) tensor"). How the reference is kept from mutated inputs: every
call gets its own copies of the inputs (`own_copies`), made afresh for each
call, so a repeated call (a warm call, the timing runs) never sees what an
earlier call wrote, and the copies are compared bit for bit with the
originals after the call, which makes writing into an input a failure in
every timing mode.
"""
from __future__ import annotations

import importlib
import re
import signal
import threading
import time
from typing import Any, Callable, Mapping

import torch

from e2egen.runner.arithmetic.torch_deviations import TORCH_IMPL
from e2egen.runner.dtypes import storage_dtype
from e2egen.runner.device import synchronize, tf32_mode
from e2egen.runner.errors import (ImplError, KernelDeclined, KernelFailure, Skip, belongs_to_the_harness,
                                  exception_text)
from e2egen.runner.import_path import search_path_text
from e2egen.runner.inputs import arrange_for_kernel, input_formats
from e2egen.runner.isolation import guarded, kernel_isolation
from e2egen.runner.lowbit import widened_kernel
from e2egen.runner.ops import Op, numerics_of
from e2egen.runner.ops.base import named_outputs
from e2egen.runner.problem import Problem, check_direction, lookup_op

# Seconds the last call_kernel spent in the kernel itself (and waiting for the device): its time without the
# copying and checking around it, which runs record.
last_call_s = 0.0
# Where e2egen.api lends a lambda or closure for one call, under a fresh name: such a name outlives the call in
# no cache (a later call's kernel may carry it), so its findings are never written or read back.
LENT_KERNELS_MODULE = "e2egen.lent_kernels"
_IMPL_PATTERN = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
# How torch says an op has no kernel for a dtype/device: a missing capability, not a bug.
_NOT_IMPLEMENTED = re.compile(r"not implemented for|not supported|NotImplementedError|no kernel", re.IGNORECASE)


def is_lent(impl: str | None) -> bool:
    """Whether `impl` names a kernel lent for one call (LENT_KERNELS_MODULE)."""
    return impl is not None and impl.startswith(LENT_KERNELS_MODULE + ":")


def case_kernel(problem: Any, impl: str | None = None) -> Callable[..., Any]:
    """The kernel a problem runs with: resolve_impl's, and torch's widened where torch has no kernel for the
    dtype (fp8 and i8 conv, i8 CPU gemm: runner/lowbit.py). Runs and the probes of `e2egen arithmetic` both
    take it, so a profile measures the kernel the cases run."""
    kernel = resolve_impl(problem.op, problem.direction, impl)
    if impl is None or impl == TORCH_IMPL:
        kernel = widened_kernel(kernel, problem.dtype, problem.spec)
    return kernel


def resolve_impl(op: str | Op, direction: str, impl: str | None = None) -> Callable[..., Any]:
    """The kernel for (op, direction): torch's when impl is None or "torch", else the named callable."""
    spec = lookup_op(op)
    check_direction(spec, direction)
    if impl is None or impl == TORCH_IMPL:
        return numerics_of(spec).default_kernel(direction)
    if not isinstance(impl, str) or not _IMPL_PATTERN.fullmatch(impl):
        raise ImplError(str(impl), "expected 'package.module:function' (or \"torch\")")
    module_name, attribute_path = impl.split(":")
    try:
        with kernel_isolation():  # a module that sets global state when imported: put back, noted
            target: Any = guarded(importlib.import_module)(module_name)
    except ModuleNotFoundError as err:
        where = ""
        if err.name is not None and module_name.split(".")[0] == err.name.split(".")[0]:
            where = f" (looked in {search_path_text()})"  # the module itself is missing, not one it imports
        raise ImplError(impl, f"cannot import module {module_name!r}: {err}{where}") from err
    except BaseException as err:  # the module itself is broken (a BaseException subclass included): say how
        if belongs_to_the_harness(err) or isinstance(err, KeyboardInterrupt):
            raise
        if isinstance(err, SystemExit):  # it must not end the command (with status 0, silently)
            raise ImplError(impl, f"importing module {module_name!r} called sys.exit({err.code!r}); a kernel module "
                                  f"must not exit when imported") from err
        raise ImplError(impl, f"importing module {module_name!r} raised {type(err).__name__}: "
                              f"{_first_line(err)}") from err
    for part in attribute_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as err:
            raise ImplError(impl, f"module {module_name!r} has no attribute {attribute_path!r}") from err
    if not callable(target):
        kind = type(target).__name__
        raise ImplError(impl, f"{attribute_path!r} is {'an' if kind[0] in 'aeiou' else 'a'} {kind}, not a callable")
    return target


def call_kernel(problem: Problem, kernel: Callable[..., Any], tensors: Mapping[str, torch.Tensor],
                device: torch.device, *, label: str) -> dict[str, torch.Tensor]:
    """Run the kernel once (waiting for the device) and check its outputs against the contract: the one way a
    kernel is called, by runs, probes, experiments and studies. label: the impl's name ("torch" for torch's
    own kernel, whose missing device kernels are skips, not failures)."""
    is_torch = label == TORCH_IMPL
    watch_interrupts()
    given = own_copies(tensors)
    started = time.monotonic()
    try:
        with kernel_isolation():
            called = time.perf_counter()
            result = problem.numerics.call(guarded(kernel), problem.direction, problem.params, given)
            synchronize(device)
            global last_call_s
            last_call_s = time.perf_counter() - called
    except KernelDeclined as err:
        raise Skip(f"kernel {label} declined: {err.reason}") from err
    except KeyboardInterrupt as err:
        if interrupted_since(started):  # a real Ctrl-C (SIGINT) arrived while the kernel ran: stop the run
            raise
        raise KernelFailure(f"kernel {label} raised KeyboardInterrupt (a kernel must not raise it; "
                            f"a real Ctrl-C still stops the run)") from err
    except SystemExit as err:
        raise KernelFailure(f"kernel {label} raised SystemExit({err.code!r}) (a kernel must not end the process)") from err
    except torch.OutOfMemoryError as err:
        if device.type == "cuda":
            torch.cuda.empty_cache()
        raise KernelFailure(f"kernel {label} ran out of memory on {device}: {_first_line(err)}") from err
    except Exception as err:
        if is_torch and _NOT_IMPLEMENTED.search(f"{type(err).__name__}: {exception_text(err)}"):
            raise Skip(f"torch has no {device.type} kernel for {problem.op} {problem.direction} in "
                       f"{problem.dtype} ({problem.layout}): {_first_line(err)}") from err
        raise KernelFailure(f"kernel {label} raised {type(err).__name__}: {_first_line(err)}") from err
    except BaseException as err:  # GeneratorExit, a kernel's own BaseException subclass
        if belongs_to_the_harness(err):
            raise
        raise KernelFailure(f"kernel {label} raised {type(err).__name__}: {_first_line(err)} (a BaseException "
                            f"that is not an Exception)") from err
    check_inputs_unchanged(tensors, given, label)
    outputs = named_outputs(problem.output_names, result, lambda text: KernelFailure(f"kernel {label} {text}"))
    for name, out in list(outputs.items()):
        outputs[name] = out = _plain_tensor(out, label, name)
        check_output(problem, out, device, label, name=name)
        _check_not_a_view(problem, out, given, label, name)
    return outputs


def _plain_tensor(out: Any, label: str, name: str) -> Any:
    """A torch.Tensor subclass's output as a plain tensor (same memory), so that neither the checks nor the
    comparison run the subclass's __torch_function__; a subclass that cannot be read so is the kernel's failure."""
    if not isinstance(out, torch.Tensor) or type(out) is torch.Tensor:
        return out
    try:
        with torch._C.DisableTorchFunctionSubclass():
            return out.as_subclass(torch.Tensor)
    except Exception as err:
        raise KernelFailure(f"kernel {label} returned {name} as a {type(out).__name__} (a torch.Tensor subclass) "
                            f"that cannot be read as a tensor: {type(err).__name__}: {_first_line(err)}") from err


def own_copies(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """The kernel's own copies of its inputs: the same storage size, offset, shape and strides (its layout,
    padding included), in new memory, so that nothing the kernel writes reaches the originals."""
    copies = {}
    for name, tensor in tensors.items():
        if isinstance(tensor, torch.Tensor) and tensor.layout == torch.strided:
            copy = torch.empty((0,), dtype=tensor.dtype, device=tensor.device)
            copy.set_(tensor.untyped_storage().clone(), tensor.storage_offset(), tensor.size(), tensor.stride())
            tensor = copy
        copies[name] = tensor
    return copies


_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    kind = _SAME_SIZE_INT.get(tensor.element_size())
    return tensor.view(kind) if kind is not None and tensor.dtype != kind else tensor


def check_inputs_unchanged(originals: Mapping[str, Any], given: Mapping[str, Any], label: str,
                           when: str = "") -> None:
    """KernelFailure naming each input whose copy the kernel changed (values bit for bit, NaNs included, or
    its shape and strides)."""
    written = []
    for name, original in originals.items():
        copy = given[name]
        if not isinstance(original, torch.Tensor) or copy is original:
            continue
        if (copy.size(), copy.stride(), copy.dtype) != (original.size(), original.stride(), original.dtype):
            written.append(f"{name} (resized or restrided it)")
        elif not torch.equal(_bits(copy), _bits(original)):
            written.append(name)
    if written:
        raise KernelFailure(f"kernel {label} wrote into its input{'s' if len(written) > 1 else ''} "
                            f"{', '.join(written)}{when} (a kernel must not modify its inputs)")


def _check_not_a_view(problem: Problem, out: torch.Tensor, given: Mapping[str, Any], label: str, name: str) -> None:
    what = f"kernel {label} returned" if len(problem.outputs) == 1 else f"kernel {label} returned {name} as"
    storage = out.untyped_storage()
    if storage.nbytes() == 0:
        return
    for input_name, tensor in given.items():
        if isinstance(tensor, torch.Tensor) and tensor.layout == torch.strided \
                and tensor.untyped_storage().data_ptr() == storage.data_ptr():
            raise KernelFailure(f"{what} a view of input {input_name} (outputs must be new tensors, not its inputs "
                                f"or views of them)")


def call_on_values(problem: Problem, kernel: Callable[..., Any], values: Mapping[str, torch.Tensor],
                   device: torch.device, *, label: str) -> dict[str, torch.Tensor]:
    """A kernel on chosen logical values (the probes' and experiments' inputs, each exact in its input's
    format): stored as a case stores its inputs, called through call_kernel, every output widened to float64
    on the CPU."""
    formats = input_formats(problem)
    inputs = {name: values[name].to(storage_dtype(formats[name])) for name in problem.input_shapes}
    with tf32_mode(problem.dtype == "tf32"):
        outputs = call_kernel(problem, kernel, arrange_for_kernel(problem, inputs, device), device, label=label)
    return {name: out.detach().to("cpu", torch.float64) for name, out in outputs.items()}


# -- telling a kernel's own KeyboardInterrupt from a real Ctrl-C ---------------------------
_last_sigint: float | None = None  # time.monotonic() of the last SIGINT this process received
_watching = False


def watch_interrupts() -> None:
    """Note the time of every SIGINT, then let the handler in place act as before (Python's raises
    KeyboardInterrupt). Installed once, from the main thread, only over a handler that is a callable."""
    global _watching
    if _watching or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIG_IGN / SIG_DFL: nothing raises KeyboardInterrupt from a signal here
        _watching = True
        return

    def note_sigint(signum, frame):
        global _last_sigint
        _last_sigint = time.monotonic()
        return previous(signum, frame)

    signal.signal(signal.SIGINT, note_sigint)
    _watching = True


def interrupted_since(started: float) -> bool:
    """Whether the process received a SIGINT at or after `started` (a time.monotonic())."""
    return _last_sigint is not None and _last_sigint >= started


def check_output(problem: Problem, out: Any, device: torch.device, label: str, name: str | None = None) -> None:
    """One output (the primary one unless named) against its logical shape, format and device."""
    spec = problem.outputs[name or problem.primary_output]
    what = f"kernel {label} returned" if len(problem.outputs) == 1 else f"kernel {label} returned {name} as"
    if not isinstance(out, torch.Tensor):
        raise KernelFailure(f"{what} {type(out).__name__}, expected a torch.Tensor")
    if out.layout != torch.strided:
        layout = str(out.layout).removeprefix("torch.")
        kind = f"sparse ({layout})" if "sparse" in layout else layout
        raise KernelFailure(f"{what} a {kind} tensor, expected a dense (strided) tensor")
    if tuple(out.shape) != tuple(spec.shape):
        raise KernelFailure(f"{what} shape {tuple(out.shape)}, expected {tuple(spec.shape)}")
    expected_dtype = storage_dtype(spec.dtype)
    if out.dtype != expected_dtype:
        raise KernelFailure(f"{what} dtype {out.dtype}, expected {expected_dtype} ({spec.dtype})")
    if out.device != device:
        raise KernelFailure(f"{what} a tensor on {out.device}, expected {device}")


def _first_line(err: BaseException) -> str:
    text = exception_text(err).strip()
    return text.splitlines()[0] if text else type(err).__name__ + "()"
