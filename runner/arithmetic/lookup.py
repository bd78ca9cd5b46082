"""The arithmetic of the kernel a case runs: from a profile, or probed once and cached."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import zlib
from dataclasses import dataclass, replace

import torch

from e2egen.runner.arithmetic.model import PROBES_REVISION, Arithmetic, CellKey, assumed_arithmetic
from e2egen.runner.arithmetic.profile import DeviceKey, find_profiles, forget_parsed_profiles, record_in_cache
from e2egen.runner.device import device_name
from e2egen.runner.dtypes import FLOAT4, INTEGER_DTYPES
from e2egen.runner.errors import KernelFailure, Skip
from e2egen.runner.isolation import changes_during, flushes_subnormals
from e2egen.runner.kernel_paths import cuda_versions, dispatch_versions
from e2egen.runner.kernels import TORCH_IMPL, is_lent
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.problem import Problem


@dataclass(frozen=True)
class Measured:
    arithmetic: Arithmetic
    cell: CellKey
    device: DeviceKey
    origin: str  # where the findings came from, as a report says it
    probed_now: bool = False

    @property
    def measured(self) -> bool:
        return not self.origin.startswith("assumed")


@functools.lru_cache(maxsize=None)  # every case asks; the versions and a plug-in's source hash do not change
def device_key(device: torch.device, impl: str) -> DeviceKey:
    """The device, impl and what decides their findings: versions, the probes' revision, and a plug-in
    kernel's source (so an edited kernel is probed again)."""
    versions = {"torch": torch.__version__.split("+")[0], "probes": str(PROBES_REVISION)}
    if impl != TORCH_IMPL:
        versions["impl_source"] = _source_digest(impl)
    if device.type == "cuda":
        versions["cuda"] = str(torch.version.cuda or "")
        versions["cudnn"] = str(torch.backends.cudnn.version() or "")
        versions.update(cuda_versions())
    else:
        versions.update(dispatch_versions())
    return DeviceKey.of(device_name(device), impl, versions)


def _source_digest(impl: str) -> str:
    """A short hash of the file defining the impl's module ("" when it cannot be read)."""
    try:
        spec = importlib.util.find_spec(impl.split(":")[0])
        origin = spec.origin if spec else None
        with open(origin, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()[:16]
    except (ImportError, OSError, TypeError, ValueError):
        return ""


def cell_of(problem: Problem) -> CellKey:
    shape = problem.spec.shape_class(problem.params, problem.direction)
    return CellKey(problem.op, problem.direction, problem.dtype, problem.layout, shape)


def probe_problem(problem: Problem) -> Problem:
    """The cell's probe problem: the op's small problem of the same shape class, a seed from the cell."""
    cell = cell_of(problem)
    params = problem.spec.probe_params(problem.params, problem.direction)
    return replace(problem, params=params, input_range=(-1.0, 1.0), seed=zlib.crc32(str(cell).encode()))


_memo: dict[tuple[DeviceKey, CellKey], Measured] = {}


def not_probed(problem: Problem) -> str | None:
    """Why the problem's cell has no probes (its arithmetic is then assumed, and said so), or None."""
    if problem.dtype in INTEGER_DTYPES:  # nothing to measure: integer sums are exact or wrap, which compare reports
        return "not probed (integer arithmetic)"
    if problem.dtype in FLOAT4:
        return "assumed (fp4's values, 0.5 to 6, cannot hold the probes' exponent gaps)"
    if problem.spec.probe_params(problem.params, problem.direction) is None:
        return f"assumed ({problem.spec.unprobed_reason(problem.params, problem.direction)})"
    return None


def probe_cell(problem: Problem, kernel: Kernel, device: torch.device, impl: str) -> Arithmetic:
    """The probes of the problem's cell on its probe problem: the op's numerics' probe_arithmetic.
    KernelFailure or Skip when the kernel cannot run them."""
    return problem.numerics.probe_arithmetic(probe_problem(problem), kernel, device, impl)


def unclean_start() -> str | None:
    """Why findings probed now must not be cached (None when they may): the process computes with flush-to-zero,
    or another default dtype than float32 (left by an earlier case or the caller). A finding learnt so would give
    later, clean runs on that cache other bounds; what a kernel changes while the probes run is runner.isolation's
    to note (changes_during)."""
    if flushes_subnormals():
        return "float32 arithmetic flushes subnormals (torch.set_flush_denormal(True))"
    if torch.get_default_dtype() != torch.float32:
        return f"the default dtype is {torch.get_default_dtype()}, not torch.float32"
    return None


def measured_arithmetic(problem: Problem, kernel: Kernel, device: torch.device, impl: str) -> Measured:
    """The findings for the problem's cell: the cached or shipped profile's, else probed now and cached.

    A kernel that fails on the probe's inputs leaves the cell unmeasured: the bound then assumes the
    dtype's arithmetic (assumed_arithmetic) and says so; the failure is not cached.
    """
    key, cell = device_key(device, impl), cell_of(problem)
    known = _memo.get((key, cell))
    if known is not None:
        return known
    for profile in ([] if is_lent(impl) else find_profiles(key)):
        found = profile.get(cell)
        if found is not None:
            where = "shipped profile" if profile.shipped else "cached profile"
            result = Measured(found, cell, key, f"{where} {profile.path.name if profile.path else ''}".strip())
            _memo[(key, cell)] = result
            return result
    reason = not_probed(problem)
    if reason is not None:
        return Measured(assumed_arithmetic(problem.dtype), cell, key, reason)
    unclean = unclean_start()
    try:
        with changes_during() as changed:  # the harness puts back what a kernel changes, but the call ran changed
            findings = probe_cell(problem, kernel, device, impl)
    except (KernelFailure, Skip) as failure:
        reason = getattr(failure, "reason", str(failure))
        return Measured(assumed_arithmetic(problem.dtype), cell, key, f"assumed (the probes could not run: {reason})")
    if unclean is None and changed:
        unclean = "the kernel changed global state while the probes ran: " + ", ".join(changed)
    if unclean is not None:  # neither cached nor remembered: a later case, in a clean state, probes afresh
        return Measured(findings, cell, key, f"probed now (not cached: {unclean})", probed_now=True)
    uncached = ("unexplained outcomes" if findings.unexplained  # the next run probes a fixed kernel afresh
                else "a kernel lent for one call has no name that outlives it" if is_lent(impl) else None)
    if uncached is not None:  # remembered in this process only
        result = Measured(findings, cell, key, f"probed now (not cached: {uncached})", probed_now=True)
        _memo[(key, cell)] = result
        return result
    path = record_in_cache(key, cell, findings)
    where = f"cached in {path}" if path is not None else "not cached: the cache cannot be written"
    result = Measured(findings, cell, key, f"probed now, {where}" if path else f"probed now ({where})", probed_now=True)
    _memo[(key, cell)] = result
    return result


def forget() -> None:
    """Drop what this process remembers (tests that change the cache directory or a kernel's source)."""
    _memo.clear()
    device_key.cache_clear()
    forget_parsed_profiles()
