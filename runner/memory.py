"""How much memory a case takes at its peak: the pre-run check's estimate (runner/run.py).

A case that does not fit is skipped with the reason before anything is allocated, so an estimate below
the real peak lets the OS kill the whole process (and every case after it): `gemm m64 n32768 k32768 f32
tt` was let through at 20 GiB and killed at 23 GiB. The phases of run(), with what each holds at once
(I: every input, O: every output; 64 = float64, s = the input format, k = the kernel's outputs):

  inputs      every input drawn in float64, its rounded copy, and a scratch copy of the largest input
              (an op's adjust_inputs; the torch rounding path's temporaries)
  kernel      the rounded inputs, the float64 copies for the reference, the layout's stored copies, the
              kernel's own copies of those (fresh for each call: runner/kernels.py), the kernel's outputs
              and as much again for its own temporaries (contiguous copies of transposed operands,
              oneDNN's reordered weights); with a bound, the f32 |inputs| scanned
              for it while the inputs were widened (Op.bound_magnitude_inputs, runner/magnitude.py)
  reference   those but the kernel's own copies and temporaries (freed when it returns), plus the float64
              outputs and the op's scratch (Op.scratch_elements)
  bound       those, plus |inputs| in float64 (where the f32 sum is not proven), the op's scratch
              again, and two output-sized tensors
  variants    ftz: a flushed copy of the inputs; accumulate=k: the reduction as lhs/rhs matrices

An input the op streams (Op.streamed_inputs: attention's K and V at long context) has no float64 copy.

tests/runner/test_runner_memory.py runs real cases of every op in fresh processes and checks that the measured
peak (ru_maxrss) stays at or below this estimate.
"""
from __future__ import annotations

import math

from e2egen.runner.dtypes import element_size
from e2egen.runner.options import BoundModel, ReferenceOptions
from e2egen.runner.problem import Problem

_ROUNDING_PIECE = 1 << 20  # metrics.rounding's piece length


# What the phases above leave out: allocator slack and the temporaries of torch's own ops (attention's
# softmax, a conv's workspace). Measured peaks of medium cases of every op (tests/runner/test_runner_memory.py)
# reached 1.09 of the phases' sum once other helpers' bound code landed; 1.25 keeps the estimate above.
MODEL_MARGIN = 1.25
# Freed blocks stay in the process's heap for the next case (runner/host_memory.py), so a case's peak
# can also hold holes its own frees left that a larger request could not reuse. A conv_gemm case whose
# phases sum to 33 MiB peaked at 22-29 MiB alone and once at 42 MiB beside another test process; this
# allowance covers such heap slack on small cases and is noise on large ones.
HEAP_SLACK = 32 << 20


def peak_bytes(problem: Problem, reference: ReferenceOptions, bound: BoundModel | None, *, same_device: bool) -> int:
    """The case's peak in bytes with the kernel and the reference on one device (same_device), else the
    reference device's share (kernel_bytes gives the kernel device's)."""
    inputs64 = 8 * (problem.input_elements - _elements(problem, _streamed(problem)))  # streamed: no float64 copy
    outputs64 = 8 * problem.output_elements
    largest64 = 8 * max(math.prod(shape) for shape in problem.input_shapes.values())
    scratch64 = 8 * problem.spec.scratch_elements(problem.params, problem.direction)
    generation = 8 * problem.input_elements + _stored_inputs(problem) + largest64  # streamed ones drawn whole too
    reference_side = inputs64 + outputs64 + scratch64
    if bound is not None:
        reference_side += inputs64 + scratch64 + 2 * outputs64 + 4 * _scanned_elements(problem)
    if reference.ftz:
        reference_side += inputs64
    lowered = problem.spec.lowered_dims(problem.params, problem.direction) if reference.accumulate else None
    if lowered is not None:
        groups, rows, reduction, cols = lowered
        reference_side += 8 * groups * reduction * (rows + cols) + 2 * outputs64 + outputs64 // 2
    reference_side += _piece_temporaries(max(problem.output_elements, problem.input_elements))
    if not same_device:
        return int(MODEL_MARGIN * max(generation, reference_side)) + HEAP_SLACK
    # the kernel's own copies and temporaries are gone when the reference starts; what was widened for it is not
    during_kernel = kernel_bytes(problem) + inputs64 + (4 * _scanned_elements(problem) if bound is not None else 0)
    after_kernel = 2 * _stored_inputs(problem) + _output_bytes(problem) + reference_side
    return int(MODEL_MARGIN * max(generation, during_kernel, after_kernel)) + HEAP_SLACK


def kernel_bytes(problem: Problem) -> int:
    """The kernel device's share: the stored inputs and the layout's copies, the kernel's own copies of them
    (runner.kernels.own_copies, made for each call), the outputs, the kernel's temporaries."""
    return (4 * _stored_inputs(problem) + 2 * _output_bytes(problem)
            + problem.spec.kernel_scratch_bytes(problem.params, problem.direction, problem.dtype))


def _output_bytes(problem: Problem) -> int:
    return sum(math.prod(spec.shape) * element_size(spec.dtype) for spec in problem.outputs.values())


def _piece_temporaries(elements: int) -> int:
    """metrics.round_to and ulp (intermediates rounded to the format, the bound's output rounding) work in
    pieces of up to 2**20 elements with about a dozen int64/float64 temporaries each."""
    return 16 * 8 * min(elements, _ROUNDING_PIECE)


def _scanned_elements(problem: Problem) -> int:
    scanned = problem.spec.bound_magnitude_inputs(problem.params, problem.direction)
    return _elements(problem, set(scanned) - set(_streamed(problem)))


def _streamed(problem: Problem) -> tuple[str, ...]:
    return problem.spec.streamed_inputs(problem.params, problem.direction)


def _elements(problem: Problem, names) -> int:
    shapes = problem.input_shapes
    return sum(math.prod(shapes[name]) for name in names)


def _stored_inputs(problem: Problem) -> int:
    return problem.input_elements * element_size(problem.dtype)
