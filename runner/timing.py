"""Kernel timing: warm up, then sample until enough time has passed; report
the median and the interquartile range, never the mean (one slow outlier
would move it), and the achieved TFLOP/s.

Adaptive repetition, as in the Vulkan seed: each sample runs the kernel
`calls` times back to back and records time / calls; after every sample
`calls` is re-aimed so a sample lasts about `sample_time_s`, which keeps
fast kernels above the timer's resolution and slow ones from eating the
budget. Sampling stops once `min_time_s` has passed and at least
`min_samples` samples exist (or after `max_samples`). With `reps` set, the
count is fixed instead: exactly `reps` samples of one call each.

On CUDA a sample is timed with CUDA events on the current stream; elsewhere
with time.perf_counter around the calls and a synchronize.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from e2egen.runner.device import synchronize
from e2egen.runner.ops.base import is_int


@dataclass(frozen=True)
class TimingOptions:
    warmup: int = 2
    reps: int | None = None  # fixed number of samples; None: adaptive
    min_time_s: float = 0.5  # adaptive: total sampling time
    sample_time_s: float = 0.02  # adaptive: aimed duration of one sample
    min_samples: int = 5
    max_samples: int = 10_000

    def __post_init__(self) -> None:
        if not is_int(self.warmup) or self.warmup < 0:
            raise ValueError(f"timing warmup must be an integer >= 0, got {self.warmup!r}")
        if self.reps is not None and (not is_int(self.reps) or self.reps < 1):
            raise ValueError(f"timing reps must be a positive integer or None (adaptive), got {self.reps!r}")
        for key in ("min_time_s", "sample_time_s"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"timing {key} must be a positive number, got {value!r}")
        if not is_int(self.min_samples) or not is_int(self.max_samples) or not 1 <= self.min_samples <= self.max_samples:
            raise ValueError(f"timing needs 1 <= min_samples <= max_samples, got {self.min_samples!r}, {self.max_samples!r}")


@dataclass(frozen=True)
class KernelTiming:
    median_s: float  # per kernel call
    q1_s: float
    q3_s: float
    reps: int  # samples taken
    calls: int  # kernel calls timed (every sample's calls)
    flops: int

    @property
    def iqr_s(self) -> float:
        return self.q3_s - self.q1_s

    @property
    def tflops(self) -> float:
        """Achieved TFLOP/s at the median time."""
        return self.flops / self.median_s / 1e12 if self.median_s > 0 else math.inf

    def describe(self) -> str:
        return (f"{self.median_s * 1e3:.3f} ms (IQR {self.iqr_s * 1e3:.3f} ms, {self.reps} samples), "
                f"{self.tflops:.3f} TFLOP/s")


def time_kernel(call: Callable[[], object], device: torch.device, flops: int, options: TimingOptions) -> KernelTiming:
    """Time `call` (one kernel invocation) on `device`."""
    for _ in range(options.warmup):
        call()
    synchronize(device)
    samples: list[float] = []
    calls, total_calls = 1, 0
    started = time.perf_counter()
    while True:
        elapsed = _timed(call, calls, device)
        samples.append(elapsed / calls)
        total_calls += calls
        if options.reps is not None:
            if len(samples) >= options.reps:
                break
            continue
        spent = time.perf_counter() - started
        if len(samples) >= options.max_samples or (spent >= options.min_time_s and len(samples) >= options.min_samples):
            break
        calls = _aim(calls, elapsed, options.sample_time_s)
    q1, median, q3 = _quartiles(samples)
    return KernelTiming(median_s=median, q1_s=q1, q3_s=q3, reps=len(samples), calls=total_calls, flops=flops)


def _timed(call: Callable[[], object], calls: int, device: torch.device) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.device(device):
            start.record()
            for _ in range(calls):
                call()
            end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    started = time.perf_counter()
    for _ in range(calls):
        call()
    synchronize(device)
    return time.perf_counter() - started


def _aim(calls: int, elapsed: float, target: float) -> int:
    """Calls per sample for the next sample to last about `target` (at most 10x change per step)."""
    if elapsed <= 0:
        return calls * 10
    wanted = calls * target / elapsed
    return max(1, min(round(wanted), calls * 10))


def _quartiles(samples: list[float]) -> tuple[float, float, float]:
    if len(samples) == 1:
        return samples[0], samples[0], samples[0]
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, median, q3
