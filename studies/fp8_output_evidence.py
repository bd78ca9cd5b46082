"""Evidence for fp8 outputs (runner/dtypes.SATURATING_OUT_DTYPES): fp8 gemms writing e4m3fn or e5m2, with sums
inside and beyond the output's range. torch's kernel and two alternates must pass; a kernel that does not
saturate, and one with an f16 accumulator, must fail (studies/kernel_matrix.py). Writes
docs/evidence/fp8-output.md.

    .venv/bin/python -m e2egen.studies.fp8_output_evidence [--seeds N] [--out PATH]
"""
from __future__ import annotations

from pathlib import Path

from e2egen.studies.kernel_matrix import Matrix
from e2egen.studies.study_main import study_main

GEMM = {"m": 32, "n": 48, "k": 256}
MATRIX = Matrix(
    title="fp8 outputs: evidence",
    command=".venv/bin/python -m e2egen.studies.fp8_output_evidence",
    direction="fwd",
    module="e2egen.runner.ops.product_sum.kernels:",
    correct={"gemm": ("fp8_f32", "fp8_split_k")},
    wrong={"gemm": ("fp8_unsaturated", "fp8_f16_accumulator")},
    cases={"gemm": {"32×48×256 writing e4m3fn": ({**GEMM, "out_dtype": "f8e4m3fn"}, "nt"),
                    "32×48×256 writing e5m2": ({**GEMM, "out_dtype": "f8e5m2"}, "nt")}},
    ranges={"[-1, 1]": (-1.0, 1.0), "[-8, 8]": (-8.0, 8.0), "[-256, 256]": (-256.0, 256.0)},
    dtypes=("f8e4m3fn", "f8e5m2"),
    # where sums pass the output's largest finite value: e4m3fn's 448 from [-8, 8] on, e5m2's 57344 on [-256, 256]
    bug_where={"fp8_unsaturated": lambda case, data: data == "[-256, 256]" or ("e4m3fn" in case and data == "[-8, 8]")},
    closing=("fp8_unsaturated runs only where sums pass the output's largest finite value: elsewhere it is the "
             "correct kernel. fp8_f16_accumulator breaks `require.acc = \"f32\"`, read by the probes through an f32 "
             "output. assert_close's fp8 tolerances fail correct kernels on most wide-range runs."),
)

if __name__ == "__main__":
    raise SystemExit(study_main(MATRIX, Path("docs/evidence/fp8-output.md")))
