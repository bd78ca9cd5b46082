"""import-rocmlir of rocmlir-gen's 8-bit types: i8, fp8/bf8 (the chip's formats) and the explicit f8 names.

Each rocMLIR -t value becomes e2egen's dtype (or pair) as rocmlir-gen reads it: -t A_B gives the filter (gemm: A)
type A and the input (gemm: B) type B; i8 writes i32 and is verified exactly; fp8 names write f32.
"""
from __future__ import annotations

import textwrap

import pytest

from e2egen.cli import main
from e2egen.generator.cases import expand
from e2egen.generator.loader import parse_catalogue
from e2egen.generator.rocmlir import convert, read_rocmlir

CONV = "-batchsize=2 -in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3"
GEMM = "-m 8 -n 8 -k 16"


def catalogue(t: str, operation: str = "gemm", extra: str = "", suffix_extra: str = "") -> str:
    config = GEMM if operation in ("gemm", "gemm_gemm", "attention") else CONV
    if operation == "gemm_gemm":
        config += " -gemmO 8"
    if operation == "attention":
        config = "-seq_len_q 8 -seq_len_k 8 -head_dim_qk 8 -head_dim_v 8"
    return textwrap.dedent(f'''
        directory = "Nightly"
        prefix = "rocmlir-gen"
        suffix = "--operation {operation} --arch %arch -pv %random_data {suffix_extra} | rocmlir-driver -c"
        [[axis]]
        name = "data type"
        values = ["{t}"]
        prefix = "-t "
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{config} {extra}"
    ''')


def import_text(text: str, fp8: str = "ocp"):
    conversion = convert(read_rocmlir(text, "t.toml"), fp8)
    cases = expand(parse_catalogue(conversion.to_toml(), "t.e2e.toml")) if conversion.suites else []
    return conversion, cases


def dtypes_of(t: str, operation: str = "gemm", fp8: str = "ocp", **kw) -> set[str]:
    _, cases = import_text(catalogue(t, operation, **kw), fp8)
    return {c.dtype for c in cases}


# rocMLIR -t value -> e2egen dtype of a gemm (A = the first type) with fp8/bf8 as OCP, and as FNUZ
GEMM_TYPES = {
    "fp8": ("f8e4m3fn", "f8e4m3fnuz"),
    "bf8": ("f8e5m2", "f8e5m2fnuz"),
    "fp8_fp8": ("f8e4m3fn", "f8e4m3fnuz"),
    "bf8_bf8": ("f8e5m2", "f8e5m2fnuz"),
    "fp8_bf8": ("f8e4m3fn_f8e5m2", "f8e4m3fnuz_f8e5m2fnuz"),
    "bf8_fp8": ("f8e5m2_f8e4m3fn", "f8e5m2fnuz_f8e4m3fnuz"),
    "f8E4M3FN": ("f8e4m3fn", "f8e4m3fn"),  # explicit formats do not depend on the chip
    "f8E5M2": ("f8e5m2", "f8e5m2"),
    "f8E4M3FNUZ": ("f8e4m3fnuz", "f8e4m3fnuz"),
    "f8E5M2FNUZ": ("f8e5m2fnuz", "f8e5m2fnuz"),
    "f8E4M3FN_f8E5M2": ("f8e4m3fn_f8e5m2", "f8e4m3fn_f8e5m2"),
    "f8E5M2_f8E4M3FN": ("f8e5m2_f8e4m3fn", "f8e5m2_f8e4m3fn"),
    "f8E4M3FNUZ_f8E5M2FNUZ": ("f8e4m3fnuz_f8e5m2fnuz", "f8e4m3fnuz_f8e5m2fnuz"),
    "f8E5M2FNUZ_f8E4M3FNUZ": ("f8e5m2fnuz_f8e4m3fnuz", "f8e5m2fnuz_f8e4m3fnuz"),
    "i8": ("i8", "i8"),
}


@pytest.mark.parametrize("t", GEMM_TYPES)
def test_every_8_bit_type_string_maps_to_its_dtype(t):
    ocp, fnuz = GEMM_TYPES[t]
    assert dtypes_of(t) == {ocp}
    assert dtypes_of(t, fp8="fnuz") == {fnuz}
    assert dtypes_of(t, fp8="both") == {ocp, fnuz}


@pytest.mark.parametrize(("t", "dtype"), [("fp8_bf8", "f8e5m2_f8e4m3fn"), ("bf8_fp8", "f8e4m3fn_f8e5m2"),
                                          ("fp8_fp8", "f8e4m3fn"), ("f8E4M3FN_f8E5M2", "f8e5m2_f8e4m3fn")])
def test_a_conv_pair_is_filter_then_input_so_x_takes_the_second_type(t, dtype):
    """rocMLIR's -t A_B types a conv's filter A and its input B; e2egen's pair gives the first input (x) its first."""
    assert dtypes_of(t, "conv2d") == {dtype}


@pytest.mark.parametrize(("force", "dtype"), [("fnuz", "f8e4m3fnuz_f8e5m2fnuz"), ("nanoo", "f8e4m3fnuz_f8e5m2fnuz"),
                                              ("ocp", "f8e4m3fn_f8e5m2"), ("arch", "f8e4m3fn_f8e5m2")])
def test_force_f8_types_picks_the_family(force, dtype):
    assert dtypes_of("fp8_bf8", suffix_extra=f"--force-f8-types={force}", fp8="both") == (
        {dtype} if force != "arch" else {"f8e4m3fn_f8e5m2", "f8e4m3fnuz_f8e5m2fnuz"})


def test_an_unknown_force_f8_types_value_is_reported():
    conversion, cases = import_text(catalogue("fp8", suffix_extra="--force-f8-types=odd"))
    assert cases == [] and "--force-f8-types=odd: rocmlir-gen knows arch, ocp, fnuz and nanoo" in "\n".join(conversion.report())


def test_i8_is_exact_at_every_level_whatever_the_thresholds():
    """rocMLIR's mcpuVerifyInt fails on any differing element and reads no threshold: so does the import."""
    text = catalogue("i8", extra="-RMS_threshold 0.1", suffix_extra="-RMS_threshold 0.2 -relDiff_threshold 0.5")
    conversion, cases = import_text(text)
    [case] = cases
    assert case.dtype == "i8"
    assert case.tolerances == {"max_abs_diff": 0}  # bound_ratio, bound_rms, bias_z, rms, max_rel_diff off
    assert case.data == "integers" and (case.lo, case.hi) == (-5.0, 4.0)  # rocMLIR's integer data


def test_fp8_gets_f32_thresholds_and_rel_diff_as_f32_outputs_do():
    _, cases = import_text(catalogue("fp8_fp8", suffix_extra="-relDiff_threshold 0.5"))
    [case] = cases
    assert case.tolerances["max_rel_diff"] == 0.5 and case.tolerances["rms"] == 1e-5


@pytest.mark.parametrize(("t", "out", "expressed"), [("fp8", "f32", True), ("fp8", "f8E4M3FN", False),
                                                     ("bf8_fp8", "i32", False), ("i8", "i32", True),
                                                     ("i8", "i8", False), ("f16", "f16", True), ("f16", "f32", False)])
def test_out_dtype_other_than_the_dtypes_own_output_is_reported(t, out, expressed):
    conversion, cases = import_text(catalogue(t, suffix_extra=f"-out_dtype {out}"))
    assert bool(cases) == expressed
    if not expressed:
        assert [c.reason for c in conversion.cases] == [f"output type {out} (-out_dtype)"]


@pytest.mark.parametrize(("t", "reason"), [("f8E8M0FNU", "data type f8E8M0FNU"),
                                           ("f8E4M3FN_f8E5M2FNUZ", "data type fp8/bf8"), ("fp8_f16", "data type fp8/bf8"),
                                           ("i32", "data type i32"), ("f64", "data type f64")])
def test_types_without_an_e2egen_dtype_are_reported_by_reason(t, reason):
    conversion, cases = import_text(catalogue(t))
    assert cases == [] and [c.reason for c in conversion.cases] == [reason]


@pytest.mark.parametrize(("operation", "t", "reason"), [
    ("conv2d_bwd_weight", "i8", "data type i8 (conv bwd_weight)"),
    ("conv2d_bwd_data", "fp8_fp8", "data type fp8/bf8 (conv bwd_data)"),
    ("gemm_gemm", "i8", "data type i8 (gemm_gemm)"),
    ("attention", "i8", "data type i8 (attention)"),
    ("attention", "fp8", "data type fp8/bf8 (attention)"),
])
def test_8_bit_types_of_other_ops_and_backward_convs_are_reported(operation, t, reason):
    """rocmlir-gen types a backward conv's tensors by role: its dy is the i32/f32 output tensor, its result 8-bit."""
    conversion, cases = import_text(catalogue(t, operation))
    assert cases == [] and {c.reason for c in conversion.cases} == {reason}


def test_a_scaled_gemm_of_wide_elements_is_reported():
    """e2egen's scaled_gemm takes fp8 and fp4 elements (fp4 and fp8 scaled gemms import: see the end of the file)."""
    conversion, cases = import_text(catalogue("f16", extra="-scaledGemm -scale_a_dtype f8E8M0FNU"))
    assert cases == [] and [c.reason for c in conversion.cases] == ["data type f16 (scaled gemm)"]


def test_fp8_option_of_the_command(capsys, tmp_path):
    source, out = tmp_path / "G.toml", tmp_path / "g.e2e.toml"
    source.write_text(catalogue("fp8_bf8"))
    assert main(["import-rocmlir", str(source), "-o", str(out), "--fp8", "both"]) == 0
    dtypes = {c.dtype for c in expand(parse_catalogue(out.read_text(), "g"))}
    assert dtypes == {"f8e4m3fn_f8e5m2", "f8e4m3fnuz_f8e5m2fnuz"}
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["import-rocmlir", str(source), "--fp8", "e4m3"])
    assert exit_info.value.code == 2 and "invalid choice" in capsys.readouterr().err
