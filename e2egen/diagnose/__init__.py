"""Diagnosis of numerical errors: `e2egen explain` (one case) and `e2egen study` (a grid, the seed's tables).

    variants.py      reference variants (the runner's) and accumulator models (partials kept in f16/bf16)
    probe.py         the exact-arithmetic probe: a kernel-bug test no rounding can fool
    explain.py       gathers the evidence for one case
    causes.py        decision rules: evidence -> findings (cause, evidence, remedy)
    report.py        explain's text output
    kernels.py       alternate kernels for studies (im2col + f32 matmul, torch without cuDNN/oneDNN)
    study_config.py  STUDY.toml: parse and validate
    study.py         run a study grid, aggregate, write Markdown and HTML
    tables.py        number and table formatting
"""
