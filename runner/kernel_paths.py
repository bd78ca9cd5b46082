"""Which of torch's CPU code paths run a case's kernels, and how to take the AVX2 paths on an AVX-512 machine.

Two choices decide what arithmetic torch's CPU kernels do (docs/concepts/default-verdict.md, "CPU paths", has the evidence):
- ATen's vectorised kernels (softmax, exp, reductions, ...) are compiled once per instruction set and
  dispatched by `torch.backends.cpu.get_cpu_capability()` (AVX512, AVX2, ...);
- convolutions and matmuls in bf16 or f16 go to oneDNN only where torch finds the CPU fit for that format
  (AVX-512 BF16 / AVX-512 FP16 or AMX); elsewhere torch's own kernels run them, with other partial sums.

On CUDA, torch's reduced-precision switches for f16/bf16 matmuls do (`cuda_versions`). All of these go
into an arithmetic profile's key (`dispatch_versions`), so a profile measured on one path is never
used on the other.

`E2EGEN_EMULATE_CPU=avx2` makes an AVX-512 machine take the paths an AVX2-only machine takes: ATen dispatches
to its AVX2 kernels (ATEN_CPU_CAPABILITY, read by torch at its first CPU kernel) and oneDNN is switched off
(on AVX2 torch keeps bf16/f16 out of oneDNN; f32 convolutions then run as im2col + gemm, with the same
findings as oneDNN's), and so is NNPACK, which would otherwise take large f32 batches. Measured against a real AVX2
machine's profile: all 340 shared cells equal; ATEN_CPU_CAPABILITY alone leaves 88 of 337 different.
"""
from __future__ import annotations

import functools
import os

import torch

from e2egen.errors import UserError

EMULATE_ENV = "E2EGEN_EMULATE_CPU"
EMULATIONS = ("avx2",)
ATEN_ENV = "ATEN_CPU_CAPABILITY"


class EmulationError(UserError):
    """An emulation that was asked for and cannot be had: an unknown name, or torch already dispatched."""


def emulation() -> str | None:
    """The emulation $E2EGEN_EMULATE_CPU asks for (None: the machine's own paths); EmulationError when unknown."""
    name = os.environ.get(EMULATE_ENV, "").strip().lower()
    if not name:
        return None
    if name not in EMULATIONS:
        raise EmulationError(f"unknown CPU emulation {name!r}; valid: {', '.join(EMULATIONS)}", key=f"${EMULATE_ENV}",
                             value=name, choices=EMULATIONS)
    return name


def apply_emulation() -> None:
    """Take the emulated paths when $E2EGEN_EMULATE_CPU asks for them (idempotent). EmulationError when
    torch chose its instruction set before this ran (it reads ATEN_CPU_CAPABILITY once)."""
    name = emulation()
    if name is None:
        return
    os.environ.setdefault(ATEN_ENV, name)
    torch.backends.mkldnn.enabled = False
    # With oneDNN off, torch would hand f32 convolutions of 16 samples or more to NNPACK (Winograd / FFT, whose
    # errors no product-sum model bounds), which an AVX2 machine, where oneDNN takes them, never does.
    torch.backends.nnpack.set_flags(False)
    capability = str(torch.backends.cpu.get_cpu_capability())
    if capability.lower() != name:
        raise EmulationError(f"torch already dispatches to {capability} ({ATEN_ENV}={os.environ.get(ATEN_ENV)!r}, or a "
                             f"CPU kernel ran before e2egen was loaded): set {ATEN_ENV}={name} in the environment "
                             f"too", key=f"${EMULATE_ENV}", value=name)


def onednn_formats() -> str:
    """The reduced-precision formats torch hands to oneDNN on this machine: "bf16+f16", "bf16" or "none"."""
    if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled):
        return "none"
    formats = [name for name, supported in (("bf16", torch.ops.mkldnn._is_mkldnn_bf16_supported),
                                            ("f16", torch.ops.mkldnn._is_mkldnn_fp16_supported)) if supported()]
    return "+".join(formats) or "none"


def dispatch_versions() -> dict[str, str]:
    """What decides torch's CPU arithmetic besides its version, as a profile key records it."""
    apply_emulation()
    return {"cpu_capability": str(torch.backends.cpu.get_cpu_capability()), "onednn": onednn_formats()}


def cuda_versions() -> dict[str, str]:
    """torch's switches that change what its CUDA matmuls may do (TF32 the runner sets per case itself)."""
    matmul = torch.backends.cuda.matmul
    return {"matmul_f16_reduction": "reduced" if matmul.allow_fp16_reduced_precision_reduction else "f32",
            "matmul_bf16_reduction": "reduced" if matmul.allow_bf16_reduced_precision_reduction else "f32"}


@functools.lru_cache(maxsize=None)  # every case's summary facts ask; a process keeps its paths
def describe() -> str:
    """One line for a report: the paths, and the emulation when one is on."""
    versions = dispatch_versions()
    name = emulation()
    text = f"torch CPU paths: ATen {versions['cpu_capability']}, oneDNN for {versions['onednn']}"
    return text + (f" (emulating {name.upper()}: ${EMULATE_ENV})" if name else "")
