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
from e2egen.runner.edge_data import EDGES_RANGE

CONV = "-batchsize=2 -in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3"
GEMM = "-m 8 -n 8 -k 16"


def rocmlir_cases(catalogue):
    """The imported catalogue's cases, the edges cases e2egen adds to its low-bit ones aside (tested on their own)."""
    return [case for case in expand(catalogue) if case.range != EDGES_RANGE]


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
    cases = rocmlir_cases(parse_catalogue(conversion.to_toml(), "t.e2e.toml")) if conversion.suites else []
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
    from e2egen.metrics.rocmlir_verifier import thresholds

    _, cases = import_text(catalogue("fp8_fp8", suffix_extra="-relDiff_threshold 0.5"))
    [case] = cases
    assert case.verifier.rel_diff == 0.5 and case.verifier.rms == 0.0
    assert thresholds(case.verifier, case.problem().out_dtype) == {"RMS": 3e-5, "absDiff": 100.0, "relDiff": 0.5}


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
    ("attention", "fp8", "data type fp8/bf8 (attention)"),  # rocmlir-gen would type every tensor fp8, its output too
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
    dtypes = {c.dtype for c in rocmlir_cases(parse_catalogue(out.read_text(), "g"))}
    assert dtypes == {"f8e4m3fn_f8e5m2", "f8e4m3fnuz_f8e5m2fnuz"}
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["import-rocmlir", str(source), "--fp8", "e4m3"])
    assert exit_info.value.code == 2 and "invalid choice" in capsys.readouterr().err


# -- fp4 (f4E2M1FN) and scaled gemms (--scaledGemm): rocmlir-gen.cpp's getGemmTypes, createGpuGemmKernel,
# createCpuGemmKernelWithMlir, the -t callback and the -quantBlockSize / -scale_a_dtype / -transScaleA options

def scaled(extra: str = "", t: str = "f4E2M1FN", suffix_extra: str = "", config: str = "-m 8 -n 8 -k 64"):
    """A rocMLIR scaled gemm catalogue: `-scaledGemm` and `extra` on one gemm config."""
    text = catalogue(t, extra=f"-scaledGemm {extra}", suffix_extra=suffix_extra).replace(GEMM, config)
    return import_text(text)


def test_fp4_gemm_is_f4e2m1_writing_f32_on_the_integers_fp4_holds():
    """rocmlir-gen's -t callback gives f4E2M1FN an f32 output; its integers -5..4 stored with arith.truncf round -5
    to -4 (fp4 holds the integers up to 4), and e2egen's integer data must be exact: -4..4."""
    conversion, cases = import_text(catalogue("f4E2M1FN"))
    [case] = cases
    assert (case.op, case.dtype, case.layout, case.params) == ("gemm", "f4e2m1", "nn", {"m": 8, "n": 8, "k": 16})
    assert case.data == "integers" and (case.lo, case.hi) == (-4.0, 4.0)
    assert case.verifier.kind == "rocmlir" and case.tolerances["bound_ratio"] == 1.0
    assert any("imported as the integers -4..4" in line for line in conversion.report())


@pytest.mark.parametrize("k", [1, 769])
def test_fp4_gemm_with_odd_k_imports(k):
    """rocMLIR's GemmVariantsF4 runs k = 769 and k = 1: e2egen pads an odd K's packed fp4 with a zero nibble."""
    conversion, cases = import_text(catalogue("f4E2M1FN").replace("-k 16", f"-k {k}"))
    [case] = cases
    assert (case.op, case.dtype, case.params["k"]) == ("gemm", "f4e2m1", k)
    assert [c.expressed for c in conversion.cases] == [True]


def test_fp4_is_for_gemms_only():
    conversion, cases = import_text(catalogue("f4E2M1FN", "conv2d"))
    assert cases == [] and [c.reason for c in conversion.cases] == ["data type f4E2M1FN (conv2d)"]


# rocMLIR flags -> scaled_gemm layout and parameters (besides m, n, k)
SCALED_FLAGS = [
    ("", "nn", {}),  # scaleA (m, k/32), scaleB (n, k/32): K contiguous, scaled_gemm's two-letter default
    ("--transA=true --transB=true", "tt", {}),
    ("-transScaleA=true", "nntt", {}),  # scaleA stored (k/32, m)
    ("-transScaleB=true", "nnnn", {}),  # scaleB stored (k/32, n): scale_b (k/32, n) as it is
    ("-transScaleA -transScaleB", "nntn", {}),
    ("--transB=true -transScaleA=false -transScaleB=true", "ntnn", {}),  # GemmScaledF4Regression's test 3
    ("-quantBlockSize 32", "nn", {}),  # rocmlir-gen's default block, scaled_gemm's mx default
    ("-quantBlockSize 16", "nn", {"block": 16}),
    ("-scale_a_dtype f8E8M0FNU -scale_b_dtype f8E8M0FNU", "nn", {}),  # rocmlir-gen's default, scaled_gemm's mx default
    ("-scale_a_dtype f32", "nn", {"scale_a_dtype": "f32"}),
    ("-scale_a_dtype f32 -scale_b_dtype f32", "nn", {"scale_a_dtype": "f32", "scale_b_dtype": "f32"}),
]


@pytest.mark.parametrize(("flags", "layout", "params"), SCALED_FLAGS)
def test_scaled_gemm_flags_map_to_scaled_gemm_layouts_and_params(flags, layout, params):
    conversion, cases = scaled(flags)
    [case] = cases
    assert (case.op, case.dtype, case.layout) == ("scaled_gemm", "f4e2m1", layout)
    assert case.params == {"m": 8, "n": 8, "k": 64, **params}  # scaling mx: scaled_gemm's default
    assert all(c.expressed for c in conversion.cases)


def test_scale_storage_follows_rocmlir_gens_scale_tensors():
    """getGemmTypes: scaleA (g, m, ⌈k/blk⌉), (g, ⌈k/blk⌉, m) with --transScaleA; scaleB (g, n, ⌈k/blk⌉), (g, ⌈k/blk⌉, n)
    with --transScaleB. The arranged tensors must have those shapes in memory (strides)."""
    import torch

    from e2egen.runner.ops import numerics_of

    op = numerics_of("scaled_gemm")
    scale_a, scale_b = torch.zeros(8, 2), torch.zeros(2, 16)  # logical: (m, k/32), (k/32, n)
    for flags, stored_a, stored_b in (("", (8, 2), (16, 2)), ("-transScaleA -transScaleB", (2, 8), (2, 16))):
        _, [case] = scaled(flags, config="-m 8 -n 16 -k 64")
        for tensor, name, stored in ((scale_a, "scale_a", stored_a), (scale_b, "scale_b", stored_b)):
            arranged = op.arrange(name, tensor, case.layout)
            in_memory = arranged if arranged.is_contiguous() else arranged.mT
            assert in_memory.is_contiguous() and tuple(in_memory.shape) == stored, (flags, name)


def test_scaled_gemm_on_a_batch_with_fp8_elements():
    _, [case] = scaled(t="f8E4M3FN", config="-g 3 -m 8 -n 8 -k 64")
    assert (case.op, case.dtype, case.params) == ("scaled_gemm", "f8e4m3fn", {"batch": 3, "m": 8, "n": 8, "k": 64})


@pytest.mark.parametrize(("flags", "reason"), [
    ("-scale_a_dtype f16", "scale type f16 (-scale_a_dtype)"),
    ("-scale_b_dtype f8E4M3FN", "scale type f8E4M3FN (-scale_b_dtype)"),
    ("-quantBlockSize 0", "-quantBlockSize 0: expected a positive integer"),
])
def test_scale_flags_without_an_equivalent_are_left_out_by_reason(flags, reason):
    conversion, cases = scaled(flags)
    assert cases == [] and [c.reason for c in conversion.cases] == [reason]


@pytest.mark.parametrize(("t", "reason"), [("f16", "data type f16 (scaled gemm)"), ("i8", "data type i8 (scaled gemm)")])
def test_scaled_gemm_of_wide_or_integer_elements_is_left_out(t, reason):
    conversion, cases = scaled(t=t)
    assert cases == [] and [c.reason for c in conversion.cases] == [reason]


def test_without_scaled_gemm_the_scale_flags_are_ignored():
    """rocmlir-gen reads -scale_a_dtype, -quantBlockSize, --transScaleA.. only for a scaled gemm (PrGemmScaledSplitK
    crosses --scaledGemm=true/false with the scale dtypes)."""
    text = catalogue("f4E2M1FN", extra="--scaledGemm=false -scale_a_dtype f32 -quantBlockSize 16 -transScaleB=true")
    conversion, [case] = import_text(text)
    assert (case.op, case.layout, case.params) == ("gemm", "nn", {"m": 8, "n": 8, "k": 16})
    ignored = [line for line in conversion.report() if line.startswith("ignored")]
    for flag in ("-scale_a_dtype f32", "-quantBlockSize 16", "-transScaleB=true"):
        assert any(f"{flag}: rocmlir-gen reads it for a scaled gemm (--scaledGemm) only" in line for line in ignored)


def test_a_scaled_gemm_axis_of_true_and_false_gives_two_suites():
    text = catalogue("f4E2M1FN").replace('[[suite]]', '[[axis]]\nname = "scaledGemm"\nvalues = ["true", "false"]\n'
                                                      'prefix = "--scaledGemm="\n[[suite]]').replace("-k 16", "-k 64")
    conversion, cases = import_text(text)
    assert sorted(c.op for c in cases) == ["gemm", "scaled_gemm"] and len(conversion.suites) == 2


def test_a_scaled_parameter_varying_along_an_axis_gives_a_config_each():
    text = catalogue("f4E2M1FN", extra="-scaledGemm").replace(
        '[[suite]]', '[[axis]]\nname = "scaleA dtype"\nvalues = ["f8E8M0FNU", "f32"]\nprefix = "-scale_a_dtype "\n[[suite]]')
    conversion, cases = import_text(text.replace("-k 16", "-k 64"))
    assert {c.config: c.params.get("scale_a_dtype") for c in cases} == {"m8-n8-k64": None, "m8-n8-k64-saf32": "f32"}
    assert not any(line.startswith("renamed") for line in conversion.report())


def test_rand_none_becomes_the_structured_pattern_ones():
    """GemmScaledF32 runs -rand none (all ones, scales 1): the f32 scales the GPU kernel converts to E8M0 then agree
    with the CPU reference. scaled_gemm's "ones" pattern: A = B = 1, power-of-two scales, an exact result."""
    conversion, [case] = scaled("-scale_a_dtype f32 -scale_b_dtype f32 -rand none")
    assert case.params == {"m": 8, "n": 8, "k": 64, "scale_a_dtype": "f32", "scale_b_dtype": "f32", "pattern": "ones"}
    assert case.config == "m8-n8-k64-saf32-sbf32-ones"
    report = "\n".join(conversion.report())
    assert 'imported as scaled_gemm\'s pattern "ones"' in report and "which e2egen does not draw" not in report


def test_random_scales_are_reported_as_data_e2egen_quantizes_instead():
    conversion, [case] = scaled("-scale_a_dtype f32")
    assert "pattern" not in case.params
    report = "\n".join(conversion.report())
    assert "rocmlir-gen fills scaleA and scaleB like A and B" in report
    assert "f32 scales: rocMLIR's GPU kernel converts them to E8M0" in report


@pytest.mark.parametrize(("t", "op_flags", "op"), [("fp8", "", "gemm"), ("f4E2M1FN", "", "gemm"),
                                                   ("f4E2M1FN", "-scaledGemm", "scaled_gemm")])
@pytest.mark.parametrize(("out", "out_dtype", "rms"), [("f32", None, 3e-5), ("fp32", None, 3e-5), ("bf16", "bf16", 1e-3),
                                                       ("f16", "f16", 1e-3), ("fp16", "f16", 1e-3)])
def test_out_dtype_of_an_fp8_or_fp4_gemm_is_its_out_dtype(t, op_flags, op, out, out_dtype, rms):
    """-out_dtype f32 is the default; bf16/f16 outputs get that format's rms and no relDiff from rocMLIR's emulated
    verifier, as rocMLIR's verifier judges f16/bf16 outputs (createVerifierFunc)."""
    from e2egen.metrics.rocmlir_verifier import thresholds

    text = catalogue(t, extra=op_flags, suffix_extra=f"-out_dtype {out} -relDiff_threshold 1e-6").replace("-k 16", "-k 64")
    _, [case] = import_text(text)
    assert case.op == op and case.params.get("out_dtype") == out_dtype
    applied = thresholds(case.verifier, case.problem().out_dtype)
    assert applied["RMS"] == rms and (applied["relDiff"] == 1e-6) == (out_dtype is None)


@pytest.mark.parametrize(("t", "op_flags"), [("fp8", ""), ("f4E2M1FN", "-scaledGemm")])
def test_other_out_dtypes_of_low_bit_gemms_are_left_out(t, op_flags):
    conversion, cases = import_text(catalogue(t, extra=op_flags, suffix_extra="-out_dtype f8E4M3FN").replace("-k 16", "-k 64"))
    assert cases == [] and [c.reason for c in conversion.cases] == ["output type f8E4M3FN (-out_dtype)"]


def test_imported_scaled_and_fp4_catalogue_loads_and_a_small_case_of_each_runs_green_on_cpu(tmp_path):
    """The command writes a catalogue that loads; one case of each kind runs green with torch's kernels on CPU."""
    from e2egen.generator.execute import execute
    from e2egen.generator.loader import load_catalogue

    source, out = tmp_path / "S.toml", tmp_path / "s.e2e.toml"
    text = catalogue("f4E2M1FN").replace('[[suite]]', '[[axis]]\nname = "scaledGemm"\nvalues = ["true", "false"]\n'
                                                      'prefix = "--scaledGemm="\n[[suite]]')
    text = text.replace("-m 8 -n 8 -k 16", "-g 2 -m 8 -n 16 -k 64 -transScaleB=true")
    text += '[[suite.test]]\nconfig = "-m 4 -n 8 -k 64 -scale_a_dtype f32 -scale_b_dtype f32 -rand none"\n'
    source.write_text(text)
    assert main(["import-rocmlir", str(source), "-o", str(out)]) == 0
    cases = rocmlir_cases(load_catalogue(str(out)))
    kinds = {(c.op, c.layout, c.params.get("pattern", "random")): c for c in cases}
    assert set(kinds) == {("scaled_gemm", "nnnn", "random"), ("scaled_gemm", "nn", "ones"), ("gemm", "nn", "random")}
    for case in kinds.values():
        outcome = execute(case, device="cpu")
        assert outcome.passed, (case.id, outcome.reason)


# -- i8 attention: rocMLIR's quantized attention (docs/concepts/lowbit-attention.md) ---------------------------------
def test_i8_attention_is_quantized_attention_with_f16_tolerances():
    conversion, cases = import_text(catalogue("i8", "attention", extra="--with-attn-scale -RMS_threshold 0.003",
                                              suffix_extra="-RMS_threshold 0.01"))
    assert {c.reason for c in conversion.cases} == {None} and {c.dtype for c in cases} == {"i8"}
    assert {(c.params["quantized"], c.params["score_scale"], c.data) for c in cases} == {(True, True, "integers")}
    assert {c.config for c in cases} == {"sq8-sk8-d8-scale-quant"}
    # the output is f16, verified by rocMLIR's f16 comparator with the thresholds: not exactly, as i8 gemms are
    assert {c.verifier.rms for c in cases} == {0.003}
    assert {tuple(sorted(c.tolerances.items())) for c in cases} == {(("bound_ratio", 1.0),)}
    assert "data type 'i8' left out" not in "\n".join(conversion.report())


def test_i8_attention_beside_other_dtypes_gets_a_suite_of_its_own():
    text = catalogue("f16", "attention").replace('values = ["f16"]', 'values = ["f16", "i8"]')
    conversion, cases = import_text(text)
    assert [(s.name, s.axes["dtypes"]) for s in conversion.suites] == [("Nightly-s", ("f16",)),
                                                                      ("Nightly-s-quantized", ("i8",))]
    assert {(c.dtype, c.params.get("quantized", False)) for c in cases} == {("f16", False), ("i8", True)}


def test_i8_gemm_and_i8_attention_keep_their_own_verdicts():
    """An i8 gemm is exact (i32 output); an i8 attention in the same file is judged as f16."""
    text = catalogue("i8", "gemm").replace("--operation gemm ", "").replace(
        f'config = "{GEMM} "', f'config = "--operation gemm {GEMM}"')
    text += ('[[suite]]\nname = "a"\n[[suite.test]]\n'
             'config = "--operation attention -seq_len_q 8 -seq_len_k 8 -head_dim_qk 8 -head_dim_v 8"\n')
    conversion, cases = import_text(text)
    verdicts = {c.op: tuple(sorted(c.tolerances)) for c in cases}
    assert verdicts == {"gemm": ("max_abs_diff",), "attention": ("bound_ratio",)}


def test_imported_i8_attention_runs_green_on_cpu(tmp_path):
    """rocMLIR's PrAttentionI8 flags (scale, bias, cross attention, GQA, causal, lse) import and run green with
    torch's kernel on CPU, on rocMLIR's -5..4 data."""
    from e2egen.generator.execute import execute
    from e2egen.generator.loader import load_catalogue

    source, out = tmp_path / "A.toml", tmp_path / "a.e2e.toml"
    text = catalogue("i8", "attention", extra="--with-attn-scale --with-attn-bias")
    text += ('[[suite.test]]\nconfig = "-num_heads_q 4 -num_heads_kv 2 -seq_len_q 16 -seq_len_k 27 -head_dim_qk 32 '
             '-head_dim_v 16 -causal -return_lse --transK=true"\n')
    source.write_text(text)
    assert main(["import-rocmlir", str(source), "-o", str(out)]) == 0
    cases = rocmlir_cases(load_catalogue(str(out)))
    assert len(cases) == 2 and {c.dtype for c in cases} == {"i8"}
    for case in cases:
        outcome = execute(case, device="cpu")
        assert outcome.passed, (case.id, outcome.reason)


def test_an_imported_i8_catalogue_gets_edges_cases_over_i8s_whole_range():
    """rocMLIR's -5..4 data never wraps an i16 accumulator nor draws -128: its imported catalogue's i8 cases get an
    edges case each that does (runner/edge_data.py), and one with an i16 accumulator fails only there."""
    conversion = convert(read_rocmlir(catalogue("i8"), "t.toml"), "ocp")
    cases = expand(parse_catalogue(conversion.to_toml(), "t.e2e.toml"))
    edges = [case for case in cases if case.range == EDGES_RANGE]
    assert edges and {(case.lo, case.hi, case.data) for case in edges} == {(-128.0, 127.0, "integers")}
    assert {case.id.rsplit("/", 1)[0] for case in edges} == {case.id.rsplit("/", 1)[0] for case in cases if case not in edges}
