"""The runner: one problem (op, direction, shape, dtype, layout, input range,
seed) -> the kernel's result on the device and a float64 reference from the
same inputs (and, on request, a rounding-error bound and kernel timings).

    p = make_problem("conv2d", "fwd", "f16", "nhwc", {"n": 1, "c": 8, "k": 8, "hw": 14, "kernel": 3, "pad": 1},
                     (-1.0, 1.0), seed=7)
    r = run(p)                       # r.out (device, f16), r.ref (float64)
    metrics.compare(r.ref, r.out, dtype=r.out_dtype)
"""
from .bound import BoundModel
from .dtypes import DTYPES
from .device import select_device
from .errors import ImplError, KernelFailure, ProblemError, Skip
from .kernels import resolve_impl
from .ops import OPS, Op
from .problem import Problem, make_problem
from .reference import ReferenceOptions
from .run import RunResult, run
from .timing import KernelTiming, TimingOptions

__all__ = [
    "BoundModel", "DTYPES", "ImplError", "KernelFailure", "KernelTiming", "OPS", "Op", "Problem", "ProblemError",
    "ReferenceOptions", "RunResult", "Skip", "TimingOptions", "make_problem", "resolve_impl", "run", "select_device",
]
