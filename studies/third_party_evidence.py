"""Evidence with a library nobody here wrote: JAX's kernels (XLA on the CPU; studies/jax_kernels.py) judged by
e2egen's default verdict beside torch's own, on every family JAX has a plain function for (element-wise math,
reductions, normalisations, gemm, convolution, attention), with assert_close on the same outputs
(studies/kernel_matrix.py).
Writes docs/evidence/third-party.md.

    pip install "jax[cpu]"        # not a dependency of e2egen
    .venv/bin/python -m e2egen.studies.third_party_evidence [--seeds N] [--out PATH]
"""
from __future__ import annotations

from pathlib import Path

from e2egen.studies.jax_kernels import KERNELS
from e2egen.studies.kernel_matrix import Matrix
from e2egen.studies.study_main import study_main

ROWS = {"rows 16×1000": ({"shape": [16, 1000]}, "contiguous"),
        "4×8×12×10, channels_last": ({"shape": [4, 8, 12, 10]}, "channels_last")}
REDUCED = {"rows 16×1000": ({"shape": [16, 1000], "axis": 1}, "contiguous"),
           "4×8×12×10 over channels, channels_last": ({"shape": [4, 8, 12, 10], "axis": 1}, "channels_last")}
SCANNED = {"rows 16×1000": ({"shape": [16, 1000], "axis": 1}, "contiguous"),
           "4×8×12×10 along W, strided": ({"shape": [4, 8, 12, 10], "axis": 3}, "strided")}
CASES = {
    **{op: ROWS for op in ("exp", "log", "log1p", "tanh", "sqrt", "rsqrt", "square", "sigmoid", "silu", "relu", "gelu",
                           "gelu_tanh", "layer_norm", "rms_norm")},
    **{op: REDUCED for op in ("sum", "mean", "max", "var")},
    **{op: SCANNED for op in ("cumsum", "softmax", "log_softmax", "logsumexp")},
    "gemm": {"64×96×512": ({"m": 64, "n": 96, "k": 512}, "nn"), "32×48×2048, B transposed": ({"m": 32, "n": 48, "k": 2048}, "nt")},
    "conv2d": {"ResNet 3×3, 2×32×14×14 → 32": ({"n": 2, "c": 32, "k": 32, "hw": 14, "kernel": 3, "pad": 1}, "nchw"),
               "1×1 stride 2, NHWC": ({"n": 2, "c": 64, "k": 32, "hw": 14, "kernel": 1, "stride": 2}, "nhwc")},
    "attention": {"2×4 heads, 128 × 256 keys, d 64": ({"batch": 2, "heads_q": 4, "seq_q": 128, "seq_k": 256,
                                                      "head_dim_qk": 64}, "bhsd"),
                  "GQA 8/2 heads, causal 128 × 128, d 64": ({"heads_q": 8, "heads_kv": 2, "seq_q": 128, "seq_k": 128,
                                                            "head_dim_qk": 64, "causal": True}, "bhsd")},
}
POSITIVE = ("(0.01, 4)",)  # log, sqrt, rsqrt
RANGES = {"[-1, 1]": (-1.0, 1.0), "[-4, 4]": (-4.0, 4.0), "(0.01, 4)": (0.01, 4.0)}


def library_matrix(title: str, command: str, module: str, kernels: dict[str, str], closing: str,
                   findings: dict | None = None) -> Matrix:
    """A library's kernels (op -> its kernel's name in `module`) on this study's geometries and ranges, beside
    torch's: the JAX study's, ONNX Runtime's (studies/onnxruntime_evidence.py) and OpenVINO's."""
    cases = {op: op_cases for op, op_cases in CASES.items() if op in kernels}
    ranges_of = {op: ("[-1, 1]", "[-4, 4]") for op in cases}
    ranges_of.update({op: POSITIVE for op in ("log", "sqrt", "rsqrt") if op in cases})
    ranges_of.update({op: ("[-1, 1]",) for op in ("log1p", "gemm", "conv2d") if op in cases})  # attention: both
    return Matrix(title=title, command=command, direction="fwd", module=module,
                  correct={op: (kernels[op],) for op in cases}, wrong={}, cases=cases, ranges=RANGES,
                  ranges_of=ranges_of, findings=findings or {}, closing=closing)


MATRIX = library_matrix(
    "A library nobody here wrote (JAX on the CPU): evidence", ".venv/bin/python -m e2egen.studies.third_party_evidence",
    "e2egen.studies.jax_kernels:", KERNELS,
    closing=("JAX's kernels are kernels nobody here wrote: each runs in the case's dtype as a JAX user calls it "
             "(layer_norm and rms_norm as Flax computes them, statistics in f32). Where one fails, it breaks a default "
             "requirement and the reason names it: JAX computes sigmoid, silu, the gelus and softmax in f16 or bf16 "
             "for those inputs (the element-wise probe and softmax's compute-format probe measure it), and keeps "
             "cumsum's running sum in the input format (the scan probe). None fails on a bound_ratio alone. In f32 "
             "every JAX kernel passes, as do torch's kernels in every format. assert_close fails correct kernels of "
             "both libraries on long log_softmax rows and gemm's cancelling sums."),
)

if __name__ == "__main__":
    raise SystemExit(study_main(MATRIX, Path("docs/evidence/third-party.md")))
