"""What the studies of libraries nobody here wrote (JAX, ONNX Runtime, OpenVINO) must show on a few of their cases."""
from __future__ import annotations

import dataclasses


def judge_first_cases(matrix, ops: tuple[str, ...]) -> dict:
    """The study's first case of each op on one seed: torch's kernels pass, and every failure of the library's
    kernels names a default requirement they do not meet (none is a bare bound_ratio). Returns the tallies."""
    from studies import kernel_matrix

    matrix = dataclasses.replace(matrix, cases={op: dict(list(matrix.cases[op].items())[:1]) for op in ops},
                                 correct={op: matrix.correct[op] for op in ops})
    tallies = kernel_matrix.evaluate(matrix, seeds=1)
    for (op, name), tally in tallies.items():
        assert tally.runs > 0, (op, name)
        if name == "torch":
            assert tally.failed == 0 and not tally.declined, (op, tally.failures)
        for failure in tally.failures:
            assert "requires" in failure, (op, name, failure)
    return tallies
