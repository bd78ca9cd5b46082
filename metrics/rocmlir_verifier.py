"""rocMLIR's own verdict, emulated: rocmlir-gen's legacy comparator (`mcpuVerify`, conv-validation-wrappers.cpp,
with the thresholds createVerifierFunc in rocmlir-gen.cpp gives it).

What it computes, on the reference `val` and the kernel's output `gpu`, both as f32:
- ±inf on either side is clamped to ±65504 first; `maxMag`, the largest of max(|val|, |gpu|) over the tensor,
  is taken before that clamp (an inf makes it infinite) and ignores NaN, as std::max does;
- an element with val == gpu, or (f32 outputs) a subnormal val, is exact and skipped;
- absDiff = |val − gpu|; relDiff = absDiff / max(|val|, 1e-8), only where val ≠ 0; the maxima never take a
  NaN (a NaN comparison is false), but Σ absDiff² does, so a NaN makes the RMS NaN and its gate fail;
- err_RMS = sqrt(Σ absDiff²) / (maxMag · sqrt(N)) — 0/0, a NaN that fails, when every element is 0;
- the case passes when all three gates do: err_RMS ≤ RMS, max absDiff ≤ absDiff, max relDiff ≤ relDiff; it
  prints "[RMS_pass absDiff_pass relDiff_pass]" and FileCheck expects "[1 1 1]".
Defaults (a threshold of 0 is "not given", as rocmlir-gen's `if (RMSThreshold)`): RMS 3e-5, or 1e-3 for
f16 and bf16 outputs; absDiff 100; relDiff 1e-6, which rocmlir-gen forces to 100 for f16 and bf16 outputs
whatever the catalogue says. Integer outputs are compared exactly ("[1 1 1]" or "[0 0 0]").

The reference: rocmlir-gen computes it in f32 and, for f16 and bf16 outputs, rounds it to the output format
before comparing. Here it is e2egen's float64 reference rounded to f32 (then to the output format): the same
value wherever the f32 computation is exact (rocMLIR's integer data in conv and gemm: products <= 25, sums far
below 2^24), and within the f32 accumulation's error elsewhere — `reference_note` says so in the report.
rocmlir-gen's newer `-comparator allclose` is not emulated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

F16_MAX = 65504.0  # what rocMLIR clamps ±inf to, in every format (its AIROCMLIR-911 note: this can hide mismatches)
REL_FLOOR = 9.99999993922529e-09  # rocMLIR's `constexpr float epsilon = 1e-8f`, as the double it divides by
NARROW_OUTPUTS = ("f16", "bf16")
DEFAULT_RMS = 3e-5
DEFAULT_RMS_NARROW = 1e-3
DEFAULT_ABS_DIFF = 100.0
DEFAULT_REL_DIFF = 1e-6
NARROW_REL_DIFF = 100.0  # rocmlir-gen switches relDiff off for f16 and bf16 outputs this way


class GivenThresholds(Protocol):
    """The catalogue's thresholds (runner.options.VerifierOptions): 0 where not given."""

    rms: float
    abs_diff: float
    rel_diff: float


@dataclass(frozen=True)
class Gate:
    name: str  # RMS, absDiff or relDiff
    value: float
    threshold: float
    passed: bool
    where: tuple[int, ...] | None = None  # the element of the maximum (absDiff, relDiff)


@dataclass(frozen=True)
class VerifierVerdict:
    """rocMLIR's verdict on one output: its three gates, or an exact comparison for an integer output."""

    gates: tuple[Gate, ...]
    exact: bool  # an integer output, compared exactly
    reference_note: str

    @property
    def passed(self) -> bool:
        return all(gate.passed for gate in self.gates)

    @property
    def printed(self) -> str:
        """What rocmlir-gen prints, "[1 1 1]" when it passes."""
        if self.exact:
            return "[1 1 1]" if self.passed else "[0 0 0]"
        return "[" + " ".join("1" if gate.passed else "0" for gate in self.gates) + "]"

    def failed_gates(self) -> list[Gate]:
        return [gate for gate in self.gates if not gate.passed]

    def summary(self) -> str:
        """One phrase: 'rocMLIR's verifier passes ([1 1 1])' or what failed, each gate with its value."""
        if self.passed:
            return f"rocMLIR's verifier passes ({self.printed})"
        failed = "; ".join(f"{g.name} {_number(g.value)} > {_number(g.threshold)}" for g in self.failed_gates())
        return f"rocMLIR's verifier fails ({self.printed}): {failed}"

    def report(self) -> str:
        lines = [f"rocMLIR's verifier (rocmlir-gen's legacy comparator): {self.printed}"]
        for gate in self.gates:
            at = f" at element {gate.where}" if gate.where is not None else ""
            lines.append(f"  {gate.name:<8} {_number(gate.value):<12} threshold {_number(gate.threshold):<10} "
                         f"{'ok' if gate.passed else 'FAIL'}{at}")
        lines.append(f"  reference: {self.reference_note}")
        return "\n".join(lines)


def thresholds(options: GivenThresholds, out_dtype: str) -> dict[str, float]:
    """The thresholds rocmlir-gen applies to an output of `out_dtype` with the catalogue's options."""
    narrow = out_dtype in NARROW_OUTPUTS
    return {
        "RMS": options.rms or (DEFAULT_RMS_NARROW if narrow else DEFAULT_RMS),
        "absDiff": options.abs_diff or DEFAULT_ABS_DIFF,
        "relDiff": NARROW_REL_DIFF if narrow else (options.rel_diff or DEFAULT_REL_DIFF),
    }


def verify(ref: torch.Tensor, out: torch.Tensor, out_dtype: str, options: GivenThresholds) -> VerifierVerdict:
    """rocMLIR's verdict on `out` against e2egen's float64 reference `ref` (same shape)."""
    import torch

    from e2egen.metrics.formats import get_format

    fmt = get_format(out_dtype)
    if fmt.is_integer:
        equal = bool(torch.equal(ref.to(torch.float64), out.to(torch.float64)))
        gate = Gate("exact", 0.0 if equal else 1.0, 0.0, equal)
        return VerifierVerdict((gate,), True, "the exact result (integer outputs are compared exactly)")
    val = ref.detach().to("cpu", torch.float64).to(torch.float32)
    note = "e2egen's float64 reference rounded to f32"
    if out_dtype in NARROW_OUTPUTS:  # rocmlir-gen rounds its f32 reference to the output format, "to be fair"
        val = val.to(fmt.torch_dtype).to(torch.float32)
        note += f", then to {out_dtype}, as rocmlir-gen rounds its f32 reference"
    note += " (rocmlir-gen computes it in f32: the same where that is exact, as on its integer data)"
    gpu = out.detach().to("cpu").to(torch.float32).reshape(val.shape)
    limits = thresholds(options, out_dtype)
    n = val.numel()
    magnitudes = torch.fmax(val.abs(), gpu.abs())  # fmax: a NaN never wins, as std::max(x, NaN) keeps x
    max_mag = float(torch.where(magnitudes.isnan(), 0.0, magnitudes).max()) if n else 0.0  # an inf stays inf
    val, gpu = (torch.where(t.isinf(), t.sign() * F16_MAX, t) for t in (val, gpu))  # only ±inf; finite values stay
    exact = val == gpu
    if out_dtype == "f32":
        exact |= (val != 0) & (val.abs() < fmt.min_normal)
    abs_diff = (val - gpu).abs().masked_fill(exact, 0.0)
    rel_diff = (abs_diff.double() / val.abs().double().clamp_min(REL_FLOOR)).masked_fill(val == 0, 0.0)  # in double
    sum_sq = float(abs_diff.double().pow(2).sum())  # a NaN stays: rocMLIR's RMS goes NaN
    rms = sum_sq ** 0.5 / (max_mag * math.sqrt(n)) if max_mag * n else math.nan
    abs_max, abs_at = _nan_ignoring_max(abs_diff)
    rel_max, rel_at = _nan_ignoring_max(rel_diff)
    gates = (
        Gate("RMS", rms, limits["RMS"], rms <= limits["RMS"]),  # NaN <= x is false: the gate fails, as rocMLIR's
        Gate("absDiff", abs_max, limits["absDiff"], abs_max <= limits["absDiff"], abs_at),
        Gate("relDiff", rel_max, limits["relDiff"], rel_max <= limits["relDiff"], rel_at),
    )
    return VerifierVerdict(gates, False, note)


def _nan_ignoring_max(values: torch.Tensor) -> tuple[float, tuple[int, ...] | None]:
    """The largest value that is not NaN, and where (rocMLIR's `if (d > max) max = d` never takes a NaN)."""
    import torch

    flat = values.reshape(-1).nan_to_num(nan=-1.0)
    if not flat.numel() or float(flat.max()) <= 0:
        return 0.0, None
    index = int(torch.argmax(flat))
    return float(flat[index]), tuple(int(i) for i in torch.unravel_index(torch.tensor(index), values.shape))


def _number(value: float) -> str:
    return f"{value:.4g}"


def disagreement(verifier: VerifierVerdict, e2egen_passed: bool, bound_ratio: float | None) -> str:
    """Why the two verdicts differ, in words ("" when they agree)."""
    if verifier.passed == e2egen_passed:
        return ""
    if e2egen_passed:
        within = f" (bound_ratio {bound_ratio:.3g})" if bound_ratio is not None else ""
        gates = ", ".join(g.name for g in verifier.failed_gates())
        all_zero = verifier.gates[0].name == "RMS" and math.isnan(verifier.gates[0].value) and not any(
            g.value for g in verifier.gates[1:])
        why = {
            "relDiff": "its relDiff gate divides by max(|ref|, 1e-8): near zero, or where terms cancel, a correctly "
                       "rounded result of this arithmetic can differ by more than the threshold times |ref|",
            "RMS": ("its RMS divides by the largest magnitude, which is 0 when every element of the result is 0: "
                    "0/0 fails even an exact result" if all_zero else
                    "its RMS gate allows a fixed fraction of the largest magnitude, whatever the accumulation length "
                    "and data: this arithmetic's rounding errors can exceed it"),
            "absDiff": "its absDiff gate is a fixed absolute threshold, whatever the magnitude of the result",
        }
        reasons = "; ".join(why[g.name] for g in verifier.failed_gates() if g.name in why)
        return (f"rocMLIR's verifier fails ({gates}) a kernel e2egen's model finds within the error bound of its "
                f"measured arithmetic{within}: {reasons}")
    return ("rocMLIR's verifier passes a kernel e2egen's model fails: its gates are looser than the error bound "
            "of the measured arithmetic here")
