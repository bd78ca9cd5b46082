"""Evidence for logsumexp's backward (docs/concepts/normalization-bound.md, "logsumexp"): torch's autograd on f32
copies (the default) and kernels written from the contract must pass; each planted bug must fail where it is one
(studies/kernel_matrix.py), among them torch's own CPU f16/bf16 backward. Writes docs/evidence/logsumexp-backward.md.

    .venv/bin/python -m e2egen.studies.logsumexp_backward_evidence [--seeds N] [--out PATH]
"""
from __future__ import annotations

from pathlib import Path

from e2egen.runner.ops.normalization import kernels
from e2egen.studies.kernel_matrix import Matrix
from e2egen.studies.study_main import study_main

MATRIX = Matrix(
    title="logsumexp backward: evidence",
    command=".venv/bin/python -m e2egen.studies.logsumexp_backward_evidence",
    direction="bwd_data",
    module="e2egen.runner.ops.normalization.kernels:",
    correct={"logsumexp": kernels.LOGSUMEXP_CORRECT_BACKWARD},
    wrong={"logsumexp": kernels.LOGSUMEXP_WRONG_BACKWARD},
    cases={"logsumexp": {"rows 8×1024": ({"shape": [8, 1024]}, "contiguous"),
                         "4×16×24, channels_last": ({"shape": [4, 16, 24]}, "channels_last"),
                         "3×100×5 over the middle axis, strided": ({"shape": [3, 100, 5], "axis": 1}, "strided"),
                         "rows 4×512, mean 1000": ({"shape": [4, 512], "offset": 1000.0}, "contiguous")}},
    ranges={"[-1, 1]": (-1.0, 1.0), "[-10, 10]": (-10.0, 10.0)},
    bug_dtypes={"torch_logsumexp_backward": ("f16", "bf16"), "logsumexp_backward_sum_in_input_format": ("f16", "bf16")},
    # exp overflows f32 only past 88.7: the kernel without the max is the correct one elsewhere
    bug_where={"logsumexp_backward_no_max": lambda case, data: "mean 1000" in case,
               # on rows of 24 or 100 a running sum in the input format errs within what the contract allows a kernel
               # that stores the weights in it before summing them (softmax's, attention's P): a bug on long rows only
               "logsumexp_backward_sum_in_input_format": lambda case, data: case.startswith("rows")},
    closing=("torch_logsumexp_backward is torch's own CPU backward in f16 and bf16 (in f32 it is correct, and on f32 "
             "copies e2egen's default kernel): grad_y·exp(x − y) with x − y, its exp and the product each rounded to "
             "the input format, up to a few ulps where an f32 kernel is within one. A row sum kept in the input "
             "format runs on the long rows only: on rows of 24 or 100 its error is within what the contract allows a "
             "kernel that stores the weights in the input format before summing them (softmax's forward, attention's "
             "P), and it passed 8 of 40 runs there."),
)

if __name__ == "__main__":
    raise SystemExit(study_main(MATRIX, Path("docs/evidence/logsumexp-backward.md")))
