"""Evidence for the element-wise backward (bwd_data of exp, tanh, relu, sqrt, log, square;
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
POSITIVE = ("(0.01, 4)", "(1, 100)")  # log and sqrt: x > 0
SIGNED = ("[-4, 4]", "[-1, 1]")

MATRIX = Matrix(
    title="The element-wise backward: evidence",
    command=".venv/bin/python -m e2egen.studies.pointwise_backward_evidence",
    direction="bwd_data",
    module="e2egen.runner.ops.pointwise.kernels:",
    correct=kernels.CORRECT_BACKWARD,
    wrong=kernels.WRONG_BACKWARD,
    cases={op: CASES for op in kernels.CORRECT_BACKWARD},
    ranges={"[-4, 4]": (-4.0, 4.0), "[-1, 1]": (-1.0, 1.0), "(0.01, 4)": (0.01, 4.0), "(1, 100)": (1.0, 100.0)},
    ranges_of={"sqrt": POSITIVE, "log": POSITIVE, "exp": SIGNED, "tanh": SIGNED, "relu": SIGNED, "square": SIGNED},
    bug_dtypes={"tanh_backward_in_format": ("f16", "bf16"), "log_backward_reciprocal_in_format": ("f16", "bf16")},
    closing=("The ranges are the forward's x (and grad_y's): y = f(x) is computed exactly and rounded, as an output "
             "a forward pass can give. The backward has no probes: it is judged in f32's arithmetic."),
)

if __name__ == "__main__":
    raise SystemExit(study_main(MATRIX, Path("docs/evidence/pointwise-backward.md")))
