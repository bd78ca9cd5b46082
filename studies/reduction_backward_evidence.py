"""Evidence for the reductions' backward (bwd_data: sum, mean, max, var, cumsum; docs/concepts/reduction-bound.md):
torch's autograd and kernels written apart from it must pass; each planted bug must fail wherever it changes a
result by more than an ulp of the output format (studies/kernel_matrix.py). Writes
docs/evidence/reduction-backward.md.

    .venv/bin/python -m e2egen.studies.reduction_backward_evidence [--seeds N] [--out PATH]
"""
from __future__ import annotations

from pathlib import Path

from e2egen.runner.ops.reductions import kernels
from e2egen.studies.kernel_matrix import Matrix
from e2egen.studies.study_main import study_main

ROWS = ({"shape": [16, 1000]}, "contiguous")
COLUMNS = ({"shape": [300, 24], "axis": 0}, "strided")
CHANNELS = ({"shape": [2, 16, 6, 6], "axis": 1}, "channels_last")
REDUCTION_CASES = {"rows 16×1000": ROWS, "columns 300×24, strided": COLUMNS,
                   "channels 2×16×6×6, channels_last": CHANNELS,
                   "everything 8×8×64": ({"shape": [8, 8, 64], "axis": [0, 1, 2]}, "contiguous")}
SCAN_CASES = {"rows 16×1000": ROWS, "columns 300×24, strided": COLUMNS, "channels 2×16×6×6, channels_last": CHANNELS}
OPS = ("sum", "mean", "max", "var", "cumsum")

MATRIX = Matrix(
    title="The reductions' backward: evidence",
    command=".venv/bin/python -m e2egen.studies.reduction_backward_evidence",
    direction="bwd_data",
    module="e2egen.runner.ops.reductions.kernels:",
    correct=kernels.CORRECT_BACKWARD,
    wrong=kernels.WRONG_BACKWARD,
    cases={op: SCAN_CASES if op == "cumsum" else REDUCTION_CASES for op in OPS},
    ranges={"[-1, 1]": (-1.0, 1.0), "[1, 5]": (1.0, 5.0)},
    bug_dtypes={"half_reciprocal_mean_backward": ("f32",), "input_format_cumsum_backward": ("f16", "bf16"),
                "torch_var_backward": ("f16", "bf16"), "var_backward_mean_in_format": ("f16", "bf16")},
    closing=("A bug within an ulp cannot be told from a correct kernel's rounding: the n − 1 divisor of a mean over "
             "4,096 elements moves it by 2.4e-4 relative, below an f16 ulp; 1/N rounded to f16 is exact where N is a "
             "power of two; ties, which the max backward splits, are rare in f32 draws. var's biased divisor N for "
             "N − 1 moves its gradient by 1/N, below a bf16 ulp on rows of 1,000. torch_var_backward is torch's own "
             "f16/bf16 var backward (the default runs it on f32 copies): it rounds the mean, x − μ and the scale to "
             "the input format."),
)

if __name__ == "__main__":
    raise SystemExit(study_main(MATRIX, Path("docs/evidence/reduction-backward.md")))
