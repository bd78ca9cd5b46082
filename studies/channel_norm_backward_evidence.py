"""Evidence for group_norm's and batch_norm's backward (docs/concepts/normalization-bound.md, "group_norm,
batch_norm"): torch's autograd on f32 copies (the default) and kernels written from the contract must pass; each
planted bug must fail (studies/kernel_matrix.py), among them torch's own CPU f16/bf16 backward of both. Writes
docs/evidence/channel-norms-backward.md.

    .venv/bin/python -m e2egen.studies.channel_norm_backward_evidence [--seeds N] [--out PATH]
"""
from __future__ import annotations

from pathlib import Path

from e2egen.runner.ops.normalization import channel_kernels
from e2egen.studies.channel_norm_evidence import MATRIX as FORWARD
from e2egen.studies.kernel_matrix import Matrix
from e2egen.studies.study_main import study_main

MATRIX = Matrix(
    title="group_norm and batch_norm backward: evidence",
    command=".venv/bin/python -m e2egen.studies.channel_norm_backward_evidence",
    direction="bwd_data",
    module="e2egen.runner.ops.normalization.channel_kernels:",
    correct=channel_kernels.CORRECT_BACKWARD,
    wrong=channel_kernels.WRONG_BACKWARD,
    cases=FORWARD.cases,
    ranges=FORWARD.ranges,
    bug_dtypes={"torch_group_norm_backward": ("f16", "bf16"), "torch_batch_norm_backward": ("f16", "bf16")},
    within_correct_error={"batch_norm_backward_unbiased": "mean 1000"},
    findings={("group_norm", "torch"): lambda case, data, dtype: "mean 1000" in case and dtype == "bf16"},
    closing=("torch_group_norm_backward and torch_batch_norm_backward are torch's own CPU backward in f16 and bf16 "
             "(in f32 they are correct, and on f32 copies e2egen's default kernels): they round intermediates to the "
             "input format. A finding on torch's group_norm backward even on f32 copies: on bf16 groups of mean 1000 "
             "(values 1000, 1004, 1008, ...) it reaches bound_ratio 4–49 where kernels written from the contract "
             "(two-pass, Welford) stay at 0.5, and it does so with exact statistics handed to it too "
             "(aten.native_group_norm_backward): its formula, not its mean or 1/σ; configs.toml leaves that case out. "
             "The eps bug is caught by the eps probe (rows whose variance is eps), not by the drawn data, where eps "
             "moves the gradients by 1e-5 relative. The unbiased variance of batch_norm_backward_unbiased moves the "
             "gradients by 0.2 % on channels of 512; on data of mean 1000 that is within what a correct f32 kernel's "
             "statistics may be off there (as the forward's group_norm_unbiased)."),
)

if __name__ == "__main__":
    raise SystemExit(study_main(MATRIX, Path("docs/evidence/channel-norms-backward.md")))
