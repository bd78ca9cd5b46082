"""Which device runs the kernel, what it can do, and its numeric modes.

Capability checks turn "this device cannot run this case" into a Skip whose
reason names the missing capability, as the Vulkan seed checks shaderFloat16
and shaderFloat64 before running: tf32 needs an NVIDIA GPU of compute
capability 8.0 or later, bf16 likewise on CUDA, a reference on the device
needs float64 there, and the case's tensors must fit in free memory.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
from typing import Iterator

import torch

from e2egen.errors import UserError

from e2egen.runner.kernel_paths import apply_emulation
from e2egen.runner.host_memory import reusable_bytes
from e2egen.runner.errors import Skip
from e2egen.runner.dtypes import FLOAT4, INTEGER_DTYPES, LOW_BIT

DEVICE_ENV = "E2E_DEVICE"
ALLOW_MISSING_ENV = "E2E_ALLOW_MISSING_DEVICE"  # "1": a device asked for and missing skips the cases instead
DEVICE_CHOICES = ("cpu", "cuda", "cuda:N")
_GIB = 2 ** 30


class DeviceError(UserError, ValueError):
    """An unknown device name, or a device asked for that this machine lacks (a user error: exit 2)."""


def select_device(name: str | torch.device | None = None) -> torch.device:
    """CUDA when available, else the CPU; `name` or $E2E_DEVICE overrides.

    An unknown name is a DeviceError listing the choices (naming $E2E_DEVICE when the name came from
    there). A device asked for by name that this machine lacks is a DeviceError too (a CI job on a machine
    that lost its GPU must not go green by skipping everything), unless $E2E_ALLOW_MISSING_DEVICE=1 says
    skipping is fine: then it is a Skip, and the case is skipped with the reason.
    """
    apply_emulation()
    source = "--device"
    if isinstance(name, torch.device):
        name = str(name)
    if not name:
        name = os.environ.get(DEVICE_ENV, "").strip() or None
        source = f"${DEVICE_ENV}"
    if name is None:
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    if name == "cpu":
        return torch.device("cpu")
    match = re.fullmatch(r"cuda(?::(\d+))?", name)
    if not match:
        raise DeviceError(f"unknown device {name!r}; valid: {', '.join(DEVICE_CHOICES)}", key=source, value=name,
                          choices=DEVICE_CHOICES)
    if not torch.cuda.is_available():
        _missing(source, name, f"CUDA is not available (torch {torch.__version__}, built with CUDA {torch.version.cuda or 'no'})")
    index = int(match.group(1)) if match.group(1) else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        _missing(source, name, f"only {torch.cuda.device_count()} CUDA device(s) exist")
    return torch.device("cuda", index)


def missing_device_allowed() -> bool:
    """Whether $E2E_ALLOW_MISSING_DEVICE says a device asked for and missing skips the cases."""
    return os.environ.get(ALLOW_MISSING_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _missing(source: str, name: str, why: str) -> None:
    reason = f"device {name!r} requested but {why}"
    if missing_device_allowed():
        raise Skip(f"{reason} (skipping: ${ALLOW_MISSING_ENV} is set)")
    raise DeviceError(f"{reason}; set {ALLOW_MISSING_ENV}=1 to skip its cases instead", key=source, value=name)


def check_device(name: str | None = None) -> None:
    """Before a run: the device asked for (`name`, else $E2E_DEVICE) is valid and present; DeviceError otherwise.

    What a pytest plugin or a sweep calls once up front, so a bad device is one message, not one per case.
    A missing device that $E2E_ALLOW_MISSING_DEVICE allows passes (its cases skip).
    """
    try:
        select_device(name)
    except Skip:
        pass


def device_name(device: torch.device) -> str:
    """"cpu", or the GPU's marketing name (e.g. "NVIDIA H100 80GB HBM3")."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (kernels launch asynchronously on GPUs)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type != "cpu":
        backend = getattr(torch, device.type, None)
        if backend is not None and hasattr(backend, "synchronize"):
            backend.synchronize()


@contextlib.contextmanager
def tf32_mode(enabled: bool) -> Iterator[None]:
    """Set cuDNN's and cuBLAS's TF32 switches for the block, then restore them.

    torch's defaults differ (cuDNN on, cuBLAS off) and users change them, so
    each case states its own: off for f32 (true f32 products), on for tf32.
    """
    saved = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = enabled
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


# -- capabilities -------------------------------------------------------------------
def require_dtype(device: torch.device, dtype: str) -> None:
    """Skip unless the device can run kernels in `dtype` (the case dtype name)."""
    if dtype == "tf32":
        if device.type != "cuda":
            raise Skip(f"tf32 is a tensor-core mode of NVIDIA GPUs; device {device_name(device)} has no tf32")
        major, minor = _compute_capability(device)
        if major < 8 and not torch.version.hip:
            raise Skip(f"tf32 needs compute capability >= 8.0; {device_name(device)} has {major}.{minor}")
    if device.type == "cuda" and not torch.version.hip and dtype in LOW_BIT and dtype not in INTEGER_DTYPES:
        major, minor = _compute_capability(device)
        needed = (10, 0) if dtype in FLOAT4 else (8, 9)  # fp4 tensor cores: Blackwell; fp8: Ada and Hopper
        if (major, minor) < needed:
            raise Skip(f"{dtype} needs tensor cores of compute capability >= {needed[0]}.{needed[1]}; "
                       f"{device_name(device)} has {major}.{minor}")
    if dtype == "bf16" and device.type == "cuda" and not torch.version.hip:
        major, minor = _compute_capability(device)
        if major < 8:
            # Older GPUs only emulate bf16 in some ops; results would not test a bf16 kernel.
            raise Skip(f"bf16 needs compute capability >= 8.0; {device_name(device)} has {major}.{minor}")


def require_float64(device: torch.device) -> None:
    if not _has_float64(str(device)):
        raise Skip(f"reference on the device needs float64, which {device_name(device)} does not support")


def require_memory(device: torch.device, needed: int, what: str) -> None:
    free = free_memory(device)
    if free is not None and needed > free:
        raise Skip(f"{what} needs {needed / _GIB:.2f} GiB but {device_name(device)} has {free / _GIB:.2f} GiB free")


def free_memory(device: torch.device) -> int | None:
    """Bytes free on the device (CUDA: the driver's count; CPU: MemAvailable plus the free space this
    process keeps in its heap for reuse, host_memory); None if unknown."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return free
    if device.type == "cpu":
        system = _available_host_memory()
        return None if system is None else system + reusable_bytes()
    return None


def _available_host_memory() -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _compute_capability(device: torch.device) -> tuple[int, int]:
    props = torch.cuda.get_device_properties(device)
    return props.major, props.minor


@functools.lru_cache(maxsize=None)
def _has_float64(device: str) -> bool:
    try:
        (torch.ones(2, dtype=torch.float64, device=device) * 2).sum().item()
        return True
    except (RuntimeError, TypeError):
        return False

