"""import-rocmlir's conv layouts and 3-d convs: every layout rocMLIR's catalogues use imports (groups away from
the dim they split included), rocMLIR's digits 0 1 2 are h w d, a 3-d layout with a depth is a conv3d, and
what the import writes runs green with torch's kernels."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from e2egen import metrics
from e2egen.generator.cases import expand
from e2egen.generator.loader import parse_catalogue
from e2egen.generator.rocmlir import convert, read_rocmlir, read_rocmlir_file
from e2egen.runner import make_problem, run

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths

MIXED = Path("/work/shared/rocmlir-e2e/MixedConvLayouts.toml")
HEADER = '''
directory = "Nightly"
prefix = "rocmlir-gen"
suffix = "--arch %arch %pv | rocmlir-driver -c"
'''
CONV = "-batchsize=2 -in_channels=4 -out_channels=4 -in_h=5 -in_w=6 -fil_h=3 -fil_w=2 -t f32"
THREE_D = "-fil_layout=kc012 -in_layout=nc012 -out_layout=nk012"


def convert_text(text: str):
    conversion = convert(read_rocmlir(textwrap.dedent(text), "t.toml"))
    return conversion, expand(parse_catalogue(conversion.to_toml(), "t.e2e.toml")) if conversion.suites else []


def one_test(config: str, axis: str = "") -> str:
    return HEADER + axis + f'''
[[suite]]
name = "s"
[[suite.test]]
config = "{config}"
'''


def passes(case) -> bool:
    problem = make_problem(case.op, case.direction, case.dtype, case.layout, case.params, (-1.0, 1.0), case.seed)
    result = run(problem, bound=case.bound, measure=False)
    return metrics.compare(result.ref, result.out, dtype=case.dtype, bound=result.bound).check({"bound_ratio": 1.0}).passed


@pytest.mark.skipif(not MIXED.exists(), reason="rocMLIR's catalogues are not on this machine")
def test_every_mixed_layout_of_rocmlir_imports_and_runs_green():
    conversion = convert(read_rocmlir_file(MIXED))
    assert not [line for line in conversion.report() if "conv layout" in line]
    cases = expand(parse_catalogue(conversion.to_toml(), "mixed.e2e.toml"))
    assert len(cases) == 54  # 3 input layouts x 2 filter x 3 output x 3 directions: every rocMLIR case
    layouts = {c.layout for c in cases}
    assert {"nghwc-gkyxc-hwkgn", "hwcgn-gkcyx-nghwk", "ngchw-gkcyx-ngkhw"} <= layouts  # an output's c is its k
    for case in cases[::7]:
        assert passes(case), case.id


@pytest.mark.parametrize("layouts,expected", [
    (THREE_D, "nchwd-kcyxz-nkhwd"),  # rocMLIR's digits are h w d: the depth last in memory
    ("-fil_layout=k201c -in_layout=n201c -out_layout=n201k", "ndhwc-kzyxc-ndhwk"),
    ("-fil_layout=gk2c01 -in_layout=n2g01c -out_layout=n2g01k", "ndghwc-gkzcyx-ndghwk"),
])
def test_a_3d_rocmlir_conv_with_a_depth_imports_as_conv3d(layouts, expected):
    config = f"{layouts} {CONV} -in_d=4 -fil_d=3 -conv_stride_d=2 -padding_d_l=1 -padding_d_r=0 -dilation_h=2 -groupsize=2"
    conversion, cases = convert_text(one_test(config))
    [suite] = conversion.suites
    assert suite.op == "conv3d" and {c.layout for c in cases} == {expected}
    [named] = suite.configs
    assert dict(named.config.params) == {"n": 2, "c": 4, "k": 4, "dhw": [4, 5, 6], "kernel": [3, 3, 2],
                                         "stride": [2, 1, 1], "pad": [[1, 0], [0, 0], [0, 0]],
                                         "dilation": [1, 2, 1], "groups": 2}
    assert named.name == "n2-c4-k4-4x5x6-f3x3x2-s2x1x1-p1_0x0_0x0_0-d1x2x1-g2"
    assert passes(cases[0])


def test_a_3d_layout_of_depth_1_is_the_2d_conv_and_depth_flags_on_a_2d_layout_are_reported_ignored():
    conversion, cases = convert_text(one_test(f"{CONV} -in_d=1", axis=f'''
[[axis]]
name = "layout"
values = ["{THREE_D}", "-fil_layout=kcyx -in_layout=nchw -out_layout=nkhw"]
'''))
    [suite] = conversion.suites
    assert suite.op == "conv2d" and {c.layout for c in cases} == {"nc01-kc01-nk01", "nchw"}
    assert any("-in_d=1: a depth; rocmlir-gen reads it only with a 3-d layout" in line for line in conversion.report())


def test_a_config_with_2d_and_3d_layouts_becomes_a_conv2d_and_a_conv3d_suite():
    conversion, cases = convert_text(one_test(f"{CONV} -in_d=3 -fil_d=2", axis=f'''
[[axis]]
name = "layout"
values = ["{THREE_D}", "-fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk"]
'''))
    assert sorted(s.op for s in conversion.suites) == ["conv2d", "conv3d"]
    assert {(c.op, c.layout) for c in cases} == {("conv3d", "nchwd-kcyxz-nkhwd"), ("conv2d", "nhwc")}


def test_an_output_depth_that_disagrees_skips_the_config_with_the_reason():
    conversion, cases = convert_text(one_test(f"{THREE_D} {CONV} -in_d=4 -fil_d=3 -out_d=7"))
    assert not cases
    assert any("-out_d=7 disagrees with the other sizes (they give 2)" in line for line in conversion.report())
