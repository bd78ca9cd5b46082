"""Asymmetric conv padding: the catalogue's forms, the kernel's view of them, and a kernel that pads one
side only failing where the ends differ."""
from __future__ import annotations

import pytest
import torch

from e2egen import metrics
from e2egen.runner import BoundModel, ProblemError, make_problem, run

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths

PARAMS = {"n": 2, "c": 8, "k": 8, "hw": [9, 8], "kernel": 3, "pad": [[2, 0], [1, 2]], "stride": [2, 1]}
VERDICT = {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0}


def problem(direction="fwd", dtype="f32", params=PARAMS, layout="nchw"):
    return make_problem("conv2d", direction, dtype, layout, params, (-1.0, 1.0), 7)


def test_pad_forms_normalise():
    p = problem().params
    assert p.pads == ((2, 0), (1, 2)) and p.out_size == ((9 + 2 - 2 - 1) // 2 + 1, 8 + 3 - 2)
    assert p.to_catalogue()["pad"] == [[2, 0], [1, 2]]
    same = problem(params={**PARAMS, "pad": [[1, 1], [2, 2]]}).params
    assert same.symmetric and same.pad == (1, 2) and same.geometry["padding"] == (1, 2)
    assert problem().params.geometry["padding"] == ((2, 0), (1, 2))


@pytest.mark.parametrize("bad", [[[1, 2]], [[1, 2, 3], [0, 0]], [[1, -1], [0, 0]], [[1, 2], 3], [[1, "a"], [0, 0]]])
def test_bad_pad_forms_name_the_key(bad):
    with pytest.raises(ProblemError) as info:
        problem(params={**PARAMS, "pad": bad})
    assert info.value.key == "pad"


def one_side_only(x, w, *, stride, padding, dilation, groups):
    """Puts all of each dim's padding before it (same output size, windows shifted): wrong wherever end > 0."""
    pairs = padding if not isinstance(padding[0], int) else [(p, p) for p in padding]
    xp = torch.nn.functional.pad(x, [q for b, e in reversed(pairs) for q in (b + e, 0)])
    return torch.nn.functional.conv2d(xp, w, None, stride, 0, dilation, groups)


def padded_then_convolved(x, w, *, stride, padding, dilation, groups):
    """Pads explicitly (in the kernel), then convolves unpadded: correct."""
    pairs = padding if not isinstance(padding[0], int) else [(p, p) for p in padding]
    xp = torch.nn.functional.pad(x, [q for b, e in reversed(pairs) for q in (b, e)])
    return torch.nn.functional.conv2d(xp, w, None, stride, 0, dilation, groups)


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_torch_kernels_pass_with_asymmetric_padding(direction, dtype):
    result = run(problem(direction, dtype), bound=BoundModel())  # measured: torch's CPU f16 backward keeps f16 partials
    comparison = metrics.compare(result.ref, result.out, dtype=result.out_dtype, bound=result.bound)
    assert comparison.check(VERDICT).passed


def test_explicit_padding_kernel_passes_and_one_sided_fails():
    good = run(problem(), impl=f"{__name__}:padded_then_convolved", bound=BoundModel(), measure=False)
    assert metrics.compare(good.ref, good.out, dtype="f32", bound=good.bound).check(VERDICT).passed
    bad = run(problem(), impl=f"{__name__}:one_side_only", bound=BoundModel(), measure=False)
    assert not metrics.compare(bad.ref, bad.out, dtype="f32", bound=bad.bound).check(VERDICT).passed
