"""One case end to end: inputs -> kernel on the device -> float64 reference
(-> error bound) (-> timing)."""
from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Mapping

import torch

from e2egen.runner import kernels, warm_calls
from e2egen.runner.arithmetic.lookup import Measured, measured_arithmetic
from e2egen.runner.bound import BoundModel, ErrorBound, error_bounds
from e2egen.runner.device import device_name, require_dtype, require_float64, require_memory, select_device, synchronize, tf32_mode
from e2egen.runner.errors import KernelFailure, Skip
from e2egen.runner.interval_bound import bound_for_output
from e2egen.runner.magnitude import scanned_inputs
from e2egen.runner.inputs import arrange_for_kernel, generate_inputs, reference_inputs
from e2egen.runner.isolation import guarded, kernel_isolation, start_case
from e2egen.runner.kernels import TORCH_IMPL, call_kernel, case_kernel, check_inputs_unchanged, own_copies
from e2egen.runner.host_memory import retain_freed_memory
from e2egen.runner.memory import kernel_bytes, peak_bytes
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.problem import Problem
from e2egen.runner.reference import ReferenceOptions, compute_reference
from e2egen.runner.timing import KernelTiming, TimingOptions, time_kernel

if TYPE_CHECKING:
    from e2egen.metrics.ulp_terms import ScaledPlusUlps

_CPU = torch.device("cpu")
# Seconds: a kernel's first call shorter than this is repeated, and the warm repeat is its recorded time.
WARM_CALL_LIMIT_S = 1.0
_CUBLAS_TF32_OVERRIDE = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"  # forces tf32 whatever allow_tf32 says


@dataclass(frozen=True, eq=False)
class OutputResult:
    """One output of a run: what the kernel returned, its reference and its bound."""

    name: str
    out: torch.Tensor  # kernel output: on the device, its format, logical shape
    ref: torch.Tensor  # float64, logical shape, on the reference device
    dtype: str  # the output's format name (f32 for tf32; i32 for integer ops)
    # the bound as metrics.compare takes it: a float64 tensor, or one compare forms inside its own pass
    compare_bound: "torch.Tensor | ScaledPlusUlps | None" = None
    error_bound: ErrorBound | None = None  # the bound's parts, to evaluate under other models

    @functools.cached_property
    def bound(self) -> torch.Tensor | None:
        """The float64 per-element error bound under the run's model, when asked for (formed on first use
        where compare_bound is a recipe)."""
        bound = self.compare_bound
        return bound if bound is None or isinstance(bound, torch.Tensor) else bound.values


@dataclass(frozen=True, eq=False)
class RunResult:
    problem: Problem
    outputs: Mapping[str, OutputResult]  # every output, the primary one first
    device: str  # "cpu" or the GPU's name
    # seconds: inputs, kernel (a warm call: see _call_warm), kernel_first_call, reference, bound
    timings: Mapping[str, float] = field(default_factory=dict)
    kernel_timing: KernelTiming | None = None
    impl: str = TORCH_IMPL
    reference: ReferenceOptions = ReferenceOptions()  # as applied: ftz is on where the kernel flushes subnormals
    arithmetic: Measured | None = None  # the kernel's measured arithmetic, which the bound followed

    @property
    def primary(self) -> OutputResult:
        return self.outputs[self.problem.primary_output]

    @property
    def out(self) -> torch.Tensor:
        return self.primary.out

    @property
    def ref(self) -> torch.Tensor:
        return self.primary.ref

    @property
    def bound(self) -> torch.Tensor | None:
        return self.primary.bound

    @property
    def out_dtype(self) -> str:
        return self.primary.dtype


def run(problem: Problem, *, impl: str | None = None, device: str | torch.device | None = None,
        reference: ReferenceOptions = ReferenceOptions(), bound: BoundModel | None = None,
        timing: TimingOptions | None = None, measure: bool | None = None, warm_kernel: bool = True) -> RunResult:
    """Run one problem; raises Skip (missing capability), KernelFailure, ImplError.

    warm_kernel: record a warm call of the kernel (_call_warm); False records its first call, with no
    repeat, where the time is not what the run is for (a PR run that judges numerics).

    measure: look up (or probe) the kernel's arithmetic; by default when there is a bound to follow it.
    The bound then follows it, and a kernel that flushes subnormals gets a flushing reference.
    """
    start_case()  # from the run's initial global state, whatever an earlier case's kernel left (runner.isolation)
    retain_freed_memory()  # each case's large tensors reuse the last one's pages (host_memory)
    dev = select_device(device)
    kernel = case_kernel(problem, impl)
    label = impl or TORCH_IMPL
    ref_device = dev if reference.device == "device" else _CPU
    _require_capabilities(problem, dev, ref_device, reference, bound)
    timings: dict[str, float] = {}

    measured: Measured | None = None
    if measure or (measure is None and bound is not None):
        started = time.perf_counter()
        with tf32_mode(problem.dtype == "tf32"):
            measured = measured_arithmetic(problem, kernel, dev, label)
        if measured.probed_now:
            timings["probes"] = time.perf_counter() - started
        if bound is not None:
            bound = bound.with_arithmetic(measured.arithmetic)
        if measured.arithmetic.flushes and not reference.ftz:
            reference = replace(reference, ftz=True)

    started = time.perf_counter()
    inputs = generate_inputs(problem)
    flush_format = problem.input_format if reference.ftz else None  # flushed while widening: no pass of its own
    streamed = problem.spec.streamed_inputs(problem.params, problem.direction)
    scanned = scanned_inputs(problem) - set(streamed) if bound is not None and ref_device == _CPU else ()
    inputs64 = reference_inputs(inputs, ref_device, flush_format, scanned, streamed)
    kernel_tensors = arrange_for_kernel(problem, inputs, dev)
    synchronize(dev)
    timings["inputs"] = time.perf_counter() - started

    kernel_timing = None
    with tf32_mode(problem.dtype == "tf32"):
        if timing is None:
            out = _call_warm(problem, kernel, kernel_tensors, dev, label, timings, repeat=warm_kernel)
        else:  # timed after its warm-up calls: the median is the recorded time
            out = call_kernel(problem, kernel, kernel_tensors, dev, label=label)
            timings["kernel_first_call"] = kernels.last_call_s
            kernel_timing = _time(problem, kernel, kernel_tensors, dev, timing, label)
            timings["kernel"] = kernel_timing.median_s

    started = time.perf_counter()
    ref = compute_reference(problem, inputs64, reference, inputs_flushed=reference.ftz)
    synchronize(ref_device)
    timings["reference"] = time.perf_counter() - started

    parts: dict[str, ErrorBound] = {}
    bounds: dict[str, torch.Tensor | ScaledPlusUlps] = {}
    if bound is not None:
        started = time.perf_counter()
        parts = dict(error_bounds(problem, ref.inputs, bound.arithmetic))
        bounds = {name: bound_for_output(part, bound, ref.values[name], out[name]) for name, part in parts.items()}
        synchronize(ref_device)
        timings["bound"] = time.perf_counter() - started

    specs = problem.outputs
    results = {name: OutputResult(name, out[name], ref.values[name], specs[name].dtype, bounds.get(name), parts.get(name))
               for name in problem.output_names}
    return RunResult(problem=problem, outputs=results, device=device_name(dev), timings=timings,
                     kernel_timing=kernel_timing, impl=label, reference=reference, arithmetic=measured)


def _call_warm(problem: Problem, kernel: Kernel, tensors: Mapping[str, torch.Tensor], dev: torch.device, label: str,
               timings: dict[str, float], repeat: bool = True) -> dict[str, torch.Tensor]:
    """The kernel's outputs, and its time in timings["kernel"] from a warm call where that is cheap.

    JIT kernels (XLA, Triton, torch.compile) compile on their first call of each shape: 38-84 ms per new
    shape measured for XLA, which is no part of the kernel's time. A first call shorter than
    WARM_CALL_LIMIT_S is therefore repeated and the repeat recorded ("kernel_first_call" keeps the first);
    a longer one is recorded as it is, since there compilation is a small share and a repeat would double
    the case's time. Nor is a call repeated whose signature this process has run already (warm_calls):
    another range or seed of the same shape finds the kernel warm. With repeat=False no call is repeated.
    """
    signature = warm_calls.signature(problem, label, tensors)
    warm_already = warm_calls.seen(signature)
    out = call_kernel(problem, kernel, tensors, dev, label=label)
    first = kernels.last_call_s  # the call itself: not the input copies and checks around it
    warm_calls.remember(signature)
    if warm_already or not repeat or first >= WARM_CALL_LIMIT_S:
        timings["kernel"] = first
        return out
    del out  # the repeat's outputs replace these; both alive at once would double the outputs' memory
    out = call_kernel(problem, kernel, tensors, dev, label=label)
    timings["kernel"] = kernels.last_call_s
    timings["kernel_first_call"] = first
    return out


def _time(problem: Problem, kernel: Kernel, tensors: Mapping[str, torch.Tensor], dev: torch.device,
          options: TimingOptions, label: str) -> KernelTiming:
    """The kernel timed on its own copies of the inputs (one set for all the timed calls: copying inside the
    loop would be timed too), checked unchanged afterwards; global state it changes is put back and noted."""
    given = own_copies(tensors)
    try:
        with kernel_isolation():
            call = guarded(kernel)  # wrapped once, outside the timed calls
            timing = time_kernel(lambda: problem.numerics.call(call, problem.direction, problem.params, given),
                                 dev, problem.flops, options)
        check_inputs_unchanged(tensors, given, label, when=" while being timed")
        return timing
    except KernelFailure:
        raise
    except torch.OutOfMemoryError as err:
        raise KernelFailure(f"kernel {label} ran out of memory while being timed: {err}") from err
    except Exception as err:  # it passed once, then failed when repeated
        raise KernelFailure(f"kernel {label} raised {type(err).__name__} while being timed: {err}") from err


def _require_capabilities(problem: Problem, dev: torch.device, ref_device: torch.device,
                          reference: ReferenceOptions, bound: BoundModel | None) -> None:
    require_dtype(dev, problem.dtype)
    if dev.type == "cuda" and problem.op == "gemm" and problem.dtype == "f32" and os.environ.get(_CUBLAS_TF32_OVERRIDE) == "1":
        raise Skip(f"{_CUBLAS_TF32_OVERRIDE}=1 makes cuBLAS run f32 matmuls as tf32; f32 gemm cannot be tested")
    if ref_device != _CPU:
        require_float64(ref_device)
    what = f"{problem.op} {problem.direction} {problem.dtype}"
    if ref_device == dev:
        require_memory(dev, peak_bytes(problem, reference, bound, same_device=True), f"{what} with its float64 reference")
    else:
        require_memory(dev, kernel_bytes(problem), what)
        require_memory(ref_device, peak_bytes(problem, reference, bound, same_device=False),
                       f"the float64 reference of {what}")
