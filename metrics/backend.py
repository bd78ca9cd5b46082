"""Which fused kernel runs a comparison (and the other numba passes: numba_path).

numba (one parallel pass, CPU only) when it is installed, plain torch
otherwise and on every other device. E2E_METRICS_BACKEND=torch|numba forces
one (for tests and for checking a result on the other path).
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

import torch

from e2egen.metrics import numba_kernels
from e2egen.metrics.names import unknown_name_error
from e2egen.metrics.options import Backend
from e2egen.notices import notify_once

BACKENDS = ("auto", "numba", "torch")
ENV_VAR = "E2E_METRICS_BACKEND"

# Elements per chunk. numba's chunks are units of work whose temporaries live
# in registers; small, so that finding a maximum's element afterwards scans
# little. torch's chunks bound the size of the temporaries: on the CPU at
# most torch's grain size (32768), so that each op runs serially in one of
# our threads (threads.py); on a device large, to keep kernel launches few.
NUMBA_CHUNK = 1 << 14
NUMBA_SMALLEST_CHUNK = 1 << 12
TORCH_CPU_CHUNK = 1 << 15
TORCH_DEVICE_CHUNK = 1 << 22
# Told once per process: pip users get numba only with the `fast` extra, and would not know what they miss.
NUMBA_MISSING = ("numba is not installed, so CPU comparisons take the plain-torch path: the same results, tens "
                 "of times slower on large outputs. Install it with `pip install numba` (the project's `fast` extra), "
                 f"or set {ENV_VAR}=torch to choose that path and silence this note.")


@contextlib.contextmanager
def chosen(name: str) -> Iterator[None]:
    """E2E_METRICS_BACKEND set to `name` inside the block, as it was after it: a benchmark's way to time the
    numba passes against their torch definitions in one process."""
    before = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = name
    try:
        yield
    finally:
        if before is None:
            del os.environ[ENV_VAR]
        else:
            os.environ[ENV_VAR] = before


def _requested(requested: str | None) -> str:
    """The backend asked for: `requested`, else the environment variable, else 'auto'; checked."""
    name = requested if requested is not None else os.environ.get(ENV_VAR, "auto") or "auto"
    if name not in BACKENDS:
        source = "backend" if requested is not None else ENV_VAR
        raise unknown_name_error(f"metrics {source}", name, BACKENDS)
    return name


def numba_path(device: torch.device, requested: str | None = None) -> bool:
    """Whether the numba kernels run for tensors on `device`: THE rule, for the comparison (choose) and for
    every other numba pass with a torch definition beside it (round_to, ulp and encode, the interval
    passes, the bound's ulp term and f32 scan, that scan too where it is taken while the inputs are
    widened): numba on the CPU when installed, unless the backend asked for (`requested`, else
    E2E_METRICS_BACKEND) is torch. Off the CPU, or without numba, simply no (whatever is asked for: those
    passes have their torch definitions; choose() refuses an explicit 'numba' there). Input generation
    (runner/draws.py, runner/narrowing.py) keeps numba where installed."""
    return numba_kernels.AVAILABLE and device.type == "cpu" and _requested(requested) != "torch"


def choose(requested: str | None, device: torch.device) -> Backend:
    """'numba' or 'torch' for a request (None: the environment variable, else 'auto'), by numba_path; an
    explicit 'numba' that cannot run is an error, and 'auto' on a CPU without numba says so once."""
    name = _requested(requested)
    if name == "numba":
        if not numba_kernels.AVAILABLE:
            raise ValueError("the numba metrics backend was asked for but numba is not installed "
                             "(pip install numba, or use the torch backend)")
        if device.type != "cpu":
            raise ValueError(f"the numba metrics backend runs on the CPU only; the tensors are on {device}")
    elif name == "auto" and device.type == "cpu" and not numba_kernels.AVAILABLE:
        notify_once("numba missing", NUMBA_MISSING)
    return "numba" if numba_path(device, name) else "torch"  # name checked: no second read of the variable


def default_chunk(backend: Backend, device: torch.device, elements: int | None = None) -> int:
    """Elements per chunk; numba's shrink for small outputs (elements given), down to NUMBA_SMALLEST_CHUNK,
    so that the maxima's chunks, scanned again, are a small part of them (65K elements: 16 chunks of 4K)."""
    if backend == "numba":
        return NUMBA_CHUNK if elements is None else min(NUMBA_CHUNK, max(NUMBA_SMALLEST_CHUNK, elements // 16))
    return TORCH_CPU_CHUNK if device.type == "cpu" else TORCH_DEVICE_CHUNK
