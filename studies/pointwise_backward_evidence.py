"""Evidence for the element-wise backward (bwd_data of exp, tanh, relu, sqrt, log, square, sigmoid, rsqrt, log1p,
silu, gelu, gelu_tanh;
runner/ops/math_functions.BACKWARD_FUNCTIONS): torch's backward and kernels written apart from it must pass; each
planted bug must fail where it is one (studies/kernel_matrix.py). Writes docs/evidence/pointwise-backward.md.

    .venv/bin/python -m e2egen.studies.pointwise_backward_evidence [--seeds N] [--out PATH]
"""
from __future__ import annotations

from pathlib import Path

from e2egen.runner.ops.pointwise import kernels
from e2egen.studies.kernel_matrix import Matrix
from e2egen.studies.study_main import study_main

CASES = {"64×1000": ({"shape": [64, 1000]}, "contiguous"),
         "4×16×10×10, channels_last": ({"shape": [4, 16, 10, 10]}, "channels_last"),
         "300×24, strided": ({"shape": [300, 24]}, "strided")}
POSITIVE = ("(0.01, 4)", "(1, 100)")  # log, sqrt and rsqrt: x > 0
SIGNED = ("[-4, 4]", "[-1, 1]")
ABOVE_MINUS_ONE = ("(-0.9, 4)", "[-1e-3, 1e-3]")  # log1p: x > -1, and near 0, its reason to exist

MATRIX = Matrix(
    title="The element-wise backward: evidence",
    command=".venv/bin/python -m e2egen.studies.pointwise_backward_evidence",
    direction="bwd_data",
    module="e2egen.runner.ops.pointwise.kernels:",
    correct=kernels.CORRECT_BACKWARD,
    wrong=kernels.WRONG_BACKWARD,
    cases={op: CASES for op in kernels.CORRECT_BACKWARD},
    ranges={"[-4, 4]": (-4.0, 4.0), "[-1, 1]": (-1.0, 1.0), "(0.01, 4)": (0.01, 4.0), "(1, 100)": (1.0, 100.0),
            "(-0.9, 4)": (-0.9, 4.0), "[-1e-3, 1e-3]": (-1e-3, 1e-3)},
    ranges_of={"sqrt": POSITIVE, "log": POSITIVE, "rsqrt": POSITIVE, "exp": SIGNED, "tanh": SIGNED, "relu": SIGNED,
               "square": SIGNED, "sigmoid": SIGNED, "log1p": ABOVE_MINUS_ONE, "silu": SIGNED, "gelu": SIGNED,
               "gelu_tanh": SIGNED},
    bug_dtypes={"tanh_backward_in_format": ("f16", "bf16"), "log_backward_reciprocal_in_format": ("f16", "bf16"),
                "torch_sigmoid_backward": ("f16",), "torch_rsqrt_backward_native": ("f16", "bf16"),
                "log1p_backward_sum_in_format": ("f16", "bf16"), "silu_backward_in_format": ("f16", "bf16")},
    closing=("The ranges are the forward's x (and grad_y's): y = f(x) is computed exactly and rounded, as an output "
             "a forward pass can give. The backward has no probes: it is judged in f32's arithmetic. Three of the "
             "planted bugs are torch's own CPU backward (the default kernels run them on f32 copies): sigmoid's "
             "computes in f16 for f16 (bf16's in f32: correct), rsqrt's rounds y³ and its products to the input "
             "format, and log1p's rounds 1 + x to it (its error shows in f16 near 0 and in both near -1)."),
)

if __name__ == "__main__":
    raise SystemExit(study_main(MATRIX, Path("docs/evidence/pointwise-backward.md")))
