"""e2egen import-rocmlir: rocMLIR's e2e catalogues become loadable e2egen catalogues, nothing dropped silently."""
from __future__ import annotations

import itertools
import re
import textwrap
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from e2egen.cli import main
from e2egen.generator.cases import expand
from e2egen.generator.loader import parse_catalogue
from e2egen.generator.rocmlir import AXIS_NAMES, CaseKey, cover_with_excludes, convert, read_rocmlir
from e2egen.runner.edge_data import EDGES_RANGE

DATA = Path(__file__).parent / "data" / "rocmlir"
RESNET = DATA / "PrResnet50.toml"
GEMM = DATA / "PrGemm.toml"


def rocmlir_cases(catalogue):
    """The imported catalogue's cases, the edges cases e2egen adds to its low-bit ones aside (tested on their own)."""
    return [case for case in expand(catalogue) if case.range != EDGES_RANGE]


def run_import(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["import-rocmlir", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def import_file(capsys, tmp_path: Path, source: Path):
    out = tmp_path / f"{source.stem}.e2e.toml"
    status, _, err = run_import(capsys, source, "-o", out)
    assert status == 0, err
    text = out.read_text()
    catalogue = parse_catalogue(text, str(out))
    return text, err, catalogue, rocmlir_cases(catalogue)


def convert_text(rocmlir_text: str):
    """Convert a rocMLIR catalogue given as text; return the conversion and its expanded cases."""
    conversion = convert(read_rocmlir(textwrap.dedent(rocmlir_text), "t.toml"))
    cases = rocmlir_cases(parse_catalogue(conversion.to_toml(), "t.e2e.toml")) if conversion.suites else []
    return conversion, cases


def ids(cases, config: str) -> set[tuple[str, str, str]]:
    return {(c.direction, c.dtype, c.layout) for c in cases if c.config == config}


# ---------------------------------------------------------------- the shipped examples


def test_resnet50_converts_to_a_loadable_catalogue(capsys, tmp_path):
    text, err, catalogue, cases = import_file(capsys, tmp_path, RESNET)
    [suite] = catalogue.suites
    assert (suite.name, suite.op, suite.pr) == ("PrResnet50-config", "conv2d", True)
    assert suite.directions == ("fwd", "bwd_data", "bwd_weight")
    assert suite.dtypes == ("f32", "f16") and suite.layouts == ("nchw", "nhwc")
    assert [c.name for c in suite.configs] == [
        "n64-c128-k128-28x28-f3x3-p1", "n64-c128-k128-28x28-f3x3-p1-2", "n64-c128-k512-28x28-f1x1", "n64-c64-k64-16x16-f1x1",
    ]
    assert dict(suite.configs[0].params) == {"n": 64, "c": 128, "k": 128, "hw": [28, 28], "kernel": [3, 3], "pad": [1, 1]}
    assert len(cases) == 3 * 12 + 10  # the last config excludes bwd_data/bwd_weight x f16 x nhwc
    assert all(c.pr for c in cases)


def test_resnet50_exclude_is_one_conjunction(capsys, tmp_path):
    _, _, _, cases = import_file(capsys, tmp_path, RESNET)
    last = ids(cases, "n64-c64-k64-16x16-f1x1")
    assert not {k for k in last if k[0] != "fwd" and k[1:] == ("f16", "nhwc")}
    assert {("fwd", "f32", "nchw"), ("fwd", "f16", "nhwc"), ("bwd_data", "f16", "nchw"), ("bwd_weight", "f32", "nhwc")} <= last
    assert len(last) == 10


def test_resnet50_rms_threshold_becomes_the_suites_verifier_threshold(capsys, tmp_path):
    text, _, catalogue, cases = import_file(capsys, tmp_path, RESNET)
    assert dict(catalogue.suites[0].verifier.common) == {"rms": 0.001}
    assert {(c.verifier.kind, c.verifier.rms, c.verifier.decides) for c in cases} == {("rocmlir", 0.001, "both")}
    # e2egen's own verdict is its default one: the import adds no tolerance of its own
    assert all(dict(c.tolerances) == {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0} for c in cases)


def test_resnet50_report_names_reverse_grid_and_the_renamed_duplicate(capsys, tmp_path):
    text, err, _, _ = import_file(capsys, tmp_path, RESNET)
    for where in (err, text):
        assert "--reverse_grid" in where
        assert "n64-c128-k128-28x28-f3x3-p1-2" in where
    assert f"{RESNET}:27: test 2 config: --reverse_grid dropped" in err  # the path as given, with the line
    assert "#   PrResnet50.toml:27: test 2 config: --reverse_grid dropped" in text  # deterministic: the name only


def test_gemm_converts_with_layouts_from_transA(capsys, tmp_path):
    _, _, catalogue, cases = import_file(capsys, tmp_path, GEMM)
    [suite] = catalogue.suites
    assert (suite.name, suite.op, suite.pr) == ("PrGemm-pr_gemm", "gemm", True)
    assert suite.layouts == ("tn", "nn") and suite.directions == ("fwd",)
    assert suite.dtypes == ("f32", "f16", "i8", "f8e4m3fn")  # rocMLIR's fp8_fp8: OCP by default
    assert [dict(c.params) for c in suite.configs] == [{"batch": 3, "m": 1024, "n": 1024, "k": 769}, {"m": 32768, "n": 32769, "k": 1}]
    assert len(cases) == 7  # schedule_version merged: each case once


def test_gemm_excludes_keep_rocmlir_meaning(capsys, tmp_path):
    _, _, _, cases = import_file(capsys, tmp_path, GEMM)
    assert ids(cases, "b3-m1024-n1024-k769") == {("fwd", "f32", "tn"), ("fwd", "f32", "nn"), ("fwd", "f16", "nn"),
                                                 ("fwd", "i8", "nn"), ("fwd", "f8e4m3fn", "nn")}  # no f16, i8, fp8 with transA
    assert ids(cases, "m32768-n32769-k1") == {("fwd", "f32", "tn"), ("fwd", "f32", "nn")}  # only f32
    assert {c.verifier.rms for c in cases if c.dtype == "f32"} == {0.0}  # no threshold in the suffix: rocMLIR's defaults


def test_gemm_report_lists_unmapped_axes_and_no_longer_its_8_bit_types(capsys, tmp_path):
    text, err, _, _ = import_file(capsys, tmp_path, GEMM)
    header = text.split("\nseed = ")[0]
    for where in (err, header):
        assert "'i8'" not in where and "'fp8_fp8'" not in where  # imported now (i8, f8e4m3fn)
        assert "schedule_version" in where
        assert "--arch %arch" in where  # ignored, but said so
    assert "not imported:" in err


@pytest.mark.parametrize("source", [RESNET, GEMM], ids=["resnet50", "gemm"])
def test_conversion_is_deterministic(capsys, tmp_path, source):
    first, second = tmp_path / "a.toml", tmp_path / "b.toml"
    assert run_import(capsys, source, "-o", first)[0] == 0
    assert run_import(capsys, source, "-o", second)[0] == 0
    status, out, _ = run_import(capsys, source)
    assert status == 0
    assert first.read_bytes() == second.read_bytes() == out.encode()  # without -o the catalogue goes to stdout


# ---------------------------------------------------------------- user errors: exit 2, one message, no traceback


def test_missing_file(capsys, tmp_path):
    status, out, err = run_import(capsys, tmp_path / "nope.toml")
    assert status == 2 and out == ""
    assert err.strip() == f"error: {tmp_path / 'nope.toml'}: no such file"


def test_invalid_toml(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('directory = "PrX"\n[[suite]\nname = "x"\n')
    status, _, err = run_import(capsys, bad)
    assert status == 2
    assert err.startswith(f"error: {bad}:2: invalid TOML") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_file_that_is_not_a_rocmlir_catalogue(capsys, tmp_path):
    other = tmp_path / "pyproject.toml"
    other.write_text('[project]\nname = "x"\n')
    status, _, err = run_import(capsys, other)
    assert status == 2 and err.startswith(f"error: {other}: not a rocMLIR e2e catalogue") and "Traceback" not in err


def test_an_e2egen_catalogue_is_recognised(capsys, tmp_path):
    converted = tmp_path / "converted.toml"
    assert run_import(capsys, GEMM, "-o", converted)[0] == 0
    status, _, err = run_import(capsys, converted)
    assert status == 2 and "looks like an e2egen catalogue already" in err


def test_output_may_not_overwrite_the_source(capsys, tmp_path):
    source = tmp_path / "PrGemm.toml"
    source.write_text(GEMM.read_text())
    status, _, err = run_import(capsys, source, "-o", source)
    assert status == 2 and "overwrite" in err and source.read_text() == GEMM.read_text()


# ---------------------------------------------------------------- mapping rules, on small catalogues

HEADER = '''
directory = "Nightly"
prefix = "rocmlir-gen"
suffix = "--arch %arch %pv -relDiff_threshold 0.01 -absDiff_threshold 0.5 | rocmlir-driver -c"
'''
CONV = "-batchsize=2 -in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3"


def test_short_flags_layouts_and_thresholds():
    conversion, cases = convert_text(HEADER + '''
        [[axis]]
        name = "operation"
        values = ["conv2d", "conv2d_bwd_weight"]
        prefix = "--operation "
        [[axis]]
        name = "layout"
        values = ["-fil_layout=gkyxc -in_layout=nhwgc -out_layout=nhwgk"]
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "-n 2 -c 4 -k 8 -H 9 -W 7 -y 3 -x 1 -u 2 -v 1 -padding_h=1 -q 0 -l 1 -j 1 -g 2 -t bf16 -RMS_threshold 0.02"
    ''')
    [suite] = conversion.suites
    assert not suite.pr  # not a Pr* directory
    [named] = suite.configs
    name, config = named.name, named.config
    assert name == "n2-c4-k8-9x7-f3x1-s2x1-p1x0-g2"
    assert dict(config.params) == {"n": 2, "c": 4, "k": 8, "hw": [9, 7], "kernel": [3, 1], "stride": [2, 1], "pad": [1, 0], "groups": 2}
    assert {(c.direction, c.dtype, c.layout) for c in cases} == {("fwd", "bf16", "nhwc"), ("bwd_weight", "bf16", "nhwc")}
    # rocMLIR's thresholds go to its emulated verifier (which itself switches relDiff off for bf16 outputs);
    # the case also gets e2egen's default verdict, which every catalogue gets (the import writes none of it).
    assert all((c.verifier.rms, c.verifier.abs_diff, c.verifier.rel_diff) == (0.02, 0.5, 0.01) for c in cases)
    assert all(dict(c.tolerances) == {"bound_ratio": 1.0, "bound_rms": 0.5, "bias_z": 6.0} for c in cases)
    assert "bound_rms" not in conversion.to_toml() and "bias_z" not in conversion.to_toml()


def test_asymmetric_padding_becomes_begin_end_pairs():
    """rocmlir-gen's correctConvParameters(): -padding_h sets both sides when -padding_h_l/_r are 0."""
    conversion, cases = convert_text(HEADER + f'''
        [[axis]]
        name = "operation"
        values = ["conv", "conv_bwd_data", "conv_bwd_weight"]
        prefix = "--operation "
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{CONV} -padding_h_l=1 -padding_h_r=0"
        [[suite.test]]
        config = "{CONV} -padding_h=1 -padding_w_l=2 -padding_w_r=2"
        [[suite.test]]
        config = "{CONV} -padding_h=1 -padding_h_l=0 -padding_h_r=0 -padding_w_l=2 -padding_w_r=1 -out_h=6 -out_w=7"
        [[suite.test]]
        config = "{CONV} -padding_h=2 -padding_h_l=1"
    ''')
    configs = {named.name: dict(named.config.params)["pad"] for named in conversion.suites[0].configs}
    assert configs == {
        "n2-c4-k8-6x6-f3x3-p1_0x0_0": [[1, 0], [0, 0]],
        "n2-c4-k8-6x6-f3x3-p1x2": [1, 2],
        "n2-c4-k8-6x6-f3x3-p1_1x2_1": [[1, 1], [2, 1]],  # -padding_h=1 fills both zero sides; out 6x7 agrees
        "n2-c4-k8-6x6-f3x3-p1_0x0_0-2": [[1, 0], [0, 0]],  # _l given: rocmlir-gen keeps _l=1, _r=0
    }
    report = "\n".join(conversion.report())
    assert "asymmetric" not in report and "skipped" not in report
    assert "-padding_h=2 with -padding_h_l=1 -padding_h_r=0: rocmlir-gen complains and uses the _l/_r values" in report
    assert len(cases) == 4 * 3  # every direction of every config
    assert {c.params["pad"] == [[1, 1], [2, 1]] for c in cases if c.config == "n2-c4-k8-6x6-f3x3-p1_1x2_1"} == {True}


def test_unknown_flag_is_reported_and_the_config_kept():
    conversion, cases = convert_text(HEADER + f'''
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{CONV} --frobnicate=3 %random_data"
    ''')
    report = "\n".join(conversion.report())
    assert "--frobnicate=3 dropped: unknown rocmlir-gen flag" in report
    assert "ignored: t.toml:8: test 1 config: lit substitution %random_data" in report
    assert len(cases) == 1


def test_exclude_left_with_only_unsupported_values_is_dropped_and_reported():
    conversion, cases = convert_text(HEADER + f'''
        [[axis]]
        name = "data type"
        values = ["f32", "f4E2M1FN", "f8E8M0FNU"]
        prefix = "-t "
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{CONV}"
        [[suite.test.exclude]]
        name = "data type"
        values = ["f4E2M1FN", "f8E8M0FNU"]
    ''')
    assert {c.dtype for c in cases} == {"f32"}
    report = "\n".join(conversion.report())
    assert "test 1 exclude" in report and "dropped" in report
    assert "'f4E2M1FN'" in report and "'f8E8M0FNU'" in report


def test_exclude_on_a_merged_axis_value_does_not_hide_cases():
    """rocMLIR still runs f16 under schedule_version 2, so the merged f16 case must stay."""
    conversion, cases = convert_text(HEADER + f'''
        [[axis]]
        name = "data type"
        values = ["f32", "f16"]
        prefix = "-t "
        [[axis]]
        name = "schedule_version"
        values = ["1", "2"]
        prefix = "--schedule_version "
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{CONV}"
        [[suite.test.exclude]]
        name = "data type"
        values = ["f16"]
        [[suite.test.exclude]]
        name = "schedule_version"
        values = ["1"]
    ''')
    assert {c.dtype for c in cases} == {"f32", "f16"}
    assert any("schedule_version" in line and "merged" in line for line in conversion.report())


def test_gemm_transposes_from_axes_and_config_flags():
    conversion, cases = convert_text(HEADER.replace("--arch", "--operation gemm --arch") + '''
        [[axis]]
        name = "transB"
        values = ["false", "true"]
        prefix = "--transB="
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "-g 1 -m 8 -k 4 -n 16"
        [[suite.test]]
        config = "--transA=true -g 2 -m 8 -k 4 -n 16 --transC=true"
    ''')
    [suite] = conversion.suites
    assert suite.axes["layouts"] == ("nn", "nt", "tn", "tt")
    assert ids(cases, "m8-n16-k4") == {("fwd", "f32", "nn"), ("fwd", "f32", "nt")}
    assert ids(cases, "b2-m8-n16-k4") == {("fwd", "f32", "tn"), ("fwd", "f32", "tt")}
    assert any("--transC=true dropped" in line for line in conversion.report())


def test_unknown_layout_and_operation_are_reported():
    conversion, cases = convert_text(HEADER + f'''
        [[axis]]
        name = "operation"
        values = ["conv2d", "softmax"]
        prefix = "--operation "
        [[axis]]
        name = "layout"
        values = ["-fil_layout=gkcyx -in_layout=ngchw -out_layout=ngkhw", "-fil_layout=gkyxc -in_layout=ngchw -out_layout=ngkhw",
                  "-fil_layout=gkyxc -in_layout=nghwc -out_layout=ngkhw"]
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{CONV}"
    ''')
    report = "\n".join(conversion.report())
    assert "operation 'softmax' has no equivalent" in report
    # mixed orders become a layout string, a group dim away from what it splits included (grouped tensors)
    assert "conv layout" not in report
    assert {(c.direction, c.layout) for c in cases} == {
        ("fwd", "nchw"), ("fwd", "ngchw-gkyxc-ngkhw"), ("fwd", "nghwc-gkyxc-ngkhw")}


def test_incomplete_shape_is_reported():
    conversion, _ = convert_text(HEADER + '''
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "-batchsize=2 -in_channels=4"
    ''')
    assert conversion.suites == ()
    assert any("incomplete conv2d shape" in line and "-out_channels" in line for line in conversion.report())


def test_excludes_cover_exactly_what_rocmlir_kept():
    """For every subset of a 2x2x2 case space, the emitted excludes leave exactly that subset."""
    axes = {"directions": ("fwd", "bwd_data"), "dtypes": ("f32", "f16"), "layouts": ("nchw", "nhwc")}
    space = [CaseKey(*k) for k in itertools.product(*(axes[a] for a in AXIS_NAMES))]
    for size in range(1, len(space) + 1):
        for kept in itertools.combinations(space, size):
            excludes = cover_with_excludes(axes, frozenset(kept))
            left = {k for k in space if not any(all(k[AXIS_NAMES.index(a)] in v for a, v in e.items()) for e in excludes)}
            assert left == set(kept), (kept, excludes)


# ---------------------------------------------------------------- attention

def convert_only(rocmlir_text: str):
    """Convert without loading the result (the attention op's catalogue checks are tested separately)."""
    return convert(read_rocmlir(textwrap.dedent(rocmlir_text), "t.toml"))


def attention_configs(conversion) -> dict[str, dict]:
    [suite] = conversion.suites
    assert suite.op == "attention" and suite.axes["directions"] == ("fwd",)
    return {named.name: dict(named.config.params) for named in suite.configs}


def attention_op_registered() -> bool:
    from e2egen.runner.ops import OPS

    return "attention" in OPS


# Excerpts of rocMLIR's mlir/test/e2e/PrAttentionF16.toml and AttentionSchedule.toml (as stored in
# /work/shared/rocmlir-e2e), flags and values unchanged, suffixes cut at the first pipe.
PR_ATTENTION_F16 = '''
    directory = "PrAttentionF16"
    prefix = "rocmlir-gen"
    suffix = "--operation attention -t f16 --arch %arch -pv %random_data %rocmlir_gen_flags -relDiff_threshold 0.02 -absDiff_threshold 0.02 -RMS_threshold 0.015 | rocmlir-driver -c"

    [[axis]]
    name = "operation"
    values = ["attention"]
    prefix = "--operation "

    [[axis]]
    name = "transK"
    values = ["true", "false"]
    prefix = "--transK="

    [[suite]]
    name = "pr_attention_f16"

    [[suite.test]]
    config = "-seq_len_q 384 -seq_len_k 384 -head_dim_qk 64 -head_dim_v 64"

    # reverse grid test
    [[suite.test]]
    config = "--reverse_grid -seq_len_q 384 -seq_len_k 384 -head_dim_qk 64 -head_dim_v 64"

    [[suite.test]]
    config = "-seq_len_q 64 -seq_len_k 64 -head_dim_qk 64 -head_dim_v 64 -perf_config attn:v1:32,32,64,32,32,32,4,0,1"

    # check scale
    [[suite.test]]
    config = "-seq_len_q 384 -seq_len_k 384 -head_dim_qk 64 -head_dim_v 64 --with-attn-scale"

    # check bias
    [[suite.test]]
    config = "-seq_len_q 384 -seq_len_k 384 -head_dim_qk 64 -head_dim_v 64 --with-attn-bias"

    # cross attention
    [[suite.test]]
    config = "-seq_len_q 128 -seq_len_k 27 -head_dim_qk 64 -head_dim_v 32 --with-attn-scale --with-attn-bias"
'''

ATTENTION_SCHEDULE = '''
    directory = "AttentionSchedule"
    prefix = "rocmlir-gen"
    suffix = "--operation attention --arch %arch -pv %random_data -rand_min 0 -rand_max 1 -rand_type float %rocmlir_gen_flags -relDiff_threshold 0.3 -absDiff_threshold 0.3 -RMS_threshold 0.15 | rocmlir-driver -c"

    [[axis]]
    name = "t"
    values = ["f16", "bf16", "i8"]
    prefix = "-t "

    [[axis]]
    name = "transQ"
    values = ["true", "false"]
    prefix = "--transQ="

    [[axis]]
    name = "transK"
    values = ["true", "false"]
    prefix = "--transK="

    [[axis]]
    name = "transV"
    values = ["true", "false"]
    prefix = "--transV="

    [[axis]]
    name = "transO"
    values = ["true", "false"]
    prefix = "--transO="

    [[suite]]
    name = "attention_schedule"

    # causal
    [[suite.test]]
    config = "-seq_len_q 384 -seq_len_k 384 -head_dim_qk 64 -head_dim_v 64 -causal --with-attn-scale --with-attn-bias -schedule_version 2"

    # GQA
    [[suite.test]]
    config = "-num_heads_q 4 -num_heads_kv 2 -seq_len_q 384 -seq_len_k 384 -head_dim_qk 64 -head_dim_v 64 --with-attn-scale --with-attn-bias -schedule_version 2"

    # GQA + KV Cache
    [[suite.test]]
    config = "-rand 1 -current_seq_len=17 -num_heads_q 4 -num_heads_kv 2 -seq_len_q 1 -seq_len_k 384 -head_dim_qk 64 -head_dim_v 64 --with-attn-scale --with-attn-bias -schedule_version 2"

    # GQA + KV Cache batch=3 + return LSE + split-kv
    [[suite.test]]
    config = "-rand 1 -return_lse -split_kv 4 -current_seq_len=17,1,32 -g 3 -num_heads_q 4 -num_heads_kv 2 -seq_len_q 1 -seq_len_k 384 -head_dim_qk 64 -head_dim_v 64 --with-attn-scale --with-attn-bias -schedule_version 2"

    # GQA + causal + KV Cache batch=3 + return LSE + split-kv (padding) + sliding window
    [[suite.test]]
    config = "-rand 1 -return_lse -split_kv 8 -current_seq_len=17,1,32 -sliding_window_size=64 -g 3 -num_heads_q 4 -num_heads_kv 2 -seq_len_q 1 -seq_len_k 384 -head_dim_qk 64 -head_dim_v 64 -causal --with-attn-scale --with-attn-bias -schedule_version 2"

    # GQA + prefix causal + KV Cache batch=3 + return LSE + split-kv (padding)
    [[suite.test]]
    config = "-rand 1 -return_lse -split_kv 8 -prefix_offset=18,5,16 -current_seq_len=17,1,32 -g 3 -num_heads_q 4 -num_heads_kv 2 -seq_len_q 1 -seq_len_k 384 -head_dim_qk 64 -head_dim_v 64 -causal --with-attn-scale --with-attn-bias -schedule_version 2"
'''


def test_attention_pr_f16_shapes_scale_and_k_layout():
    conversion = convert_only(PR_ATTENTION_F16)
    [suite] = conversion.suites
    assert (suite.name, suite.op, suite.pr) == ("PrAttentionF16-pr_attention_f16", "attention", True)
    assert suite.axes == {"directions": ("fwd",), "dtypes": ("f16",), "layouts": ("bhsd", "bhsd-kt")}
    assert dict(suite.tolerances) == {"rms": 0.015, "rel_diff": 0.02, "abs_diff": 0.02}  # rocMLIR's, for its verifier
    configs = attention_configs(conversion)
    square = {"seq_q": 384, "seq_k": 384, "head_dim_qk": 64, "scale": 1.0}  # rocMLIR scales by nothing implicit
    assert configs == {
        "sq384-sk384-d64": square,
        "sq384-sk384-d64-2": square,  # --reverse_grid dropped
        "sq64-sk64-d64": {"seq_q": 64, "seq_k": 64, "head_dim_qk": 64, "scale": 1.0},
        "sq384-sk384-d64-scale": {**square, "score_scale": True},
        "sq384-sk384-d64-bias": {**square, "score_bias": True},
        "sq128-sk27-d64-dv32-scale-bias": {"seq_q": 128, "seq_k": 27, "head_dim_qk": 64, "head_dim_v": 32, "scale": 1.0,
                                           "score_scale": True, "score_bias": True},
    }
    assert all(not named.excludes for named in suite.configs)  # --transK true and false: bhsd and bhsd-kt
    report = "\n".join(conversion.report())
    assert "--reverse_grid dropped" in report and "-perf_config attn:v1:32,32,64,32,32,32,4,0,1 dropped" in report
    assert "named 'sq384-sk384-d64-2'" in report


def test_attention_kv_cache_gqa_prefix_and_lse():
    conversion = convert_only(ATTENTION_SCHEDULE)
    suite, quantized = conversion.suites  # i8 is rocMLIR's quantized attention: a suite of its own
    assert suite.axes["dtypes"] == ("f16", "bf16") and quantized.axes["dtypes"] == ("i8",)
    assert quantized.name == suite.name + "-quantized" and quantized.axes["layouts"] == suite.axes["layouts"]
    assert ({named.name: dict(named.config.params) for named in quantized.configs}
            == {f"{named.name}-quant": {**dict(named.config.params), "quantized": True} for named in suite.configs})
    conversion = replace(conversion, suites=(suite,))
    # --transQ/--transK/--transV true, false in rocMLIR's order; K is stored transposed unless --transK.
    assert suite.axes["layouts"] == ("bhsd-qt-vt", "bhsd-qt", "bhsd-qt-kt-vt", "bhsd-qt-kt",
                                     "bhsd-vt", "bhsd", "bhsd-kt-vt", "bhsd-kt")
    gqa_kv = {"heads_q": 4, "heads_kv": 2, "seq_q": 1, "seq_k": 384, "head_dim_qk": 64, "scale": 1.0,
              "score_scale": True, "score_bias": True}
    assert attention_configs(conversion) == {
        "sq384-sk384-d64-scale-bias-causal": {"seq_q": 384, "seq_k": 384, "head_dim_qk": 64, "scale": 1.0,
                                              "score_scale": True, "score_bias": True, "causal": True, "align": "top-left"},
        "hq4-hkv2-sq384-sk384-d64-scale-bias": {**gqa_kv, "seq_q": 384},
        # -current_seq_len is the inclusive index of the last valid key: 17 -> 18 valid keys
        "hq4-hkv2-sq1-sk384-d64-scale-bias-kv18": {**gqa_kv, "kv_lengths": 18},
        "b3-hq4-hkv2-sq1-sk384-d64-scale-bias-kv18x2x33-lse": {"batch": 3, **gqa_kv, "kv_lengths": [18, 2, 33],
                                                               "return_lse": True},
        # -sliding_window_size (the older name of -sliding_window_look_back) 64: keys before max(0, P - 64) masked
        "b3-hq4-hkv2-sq1-sk384-d64-scale-bias-causal-kv18x2x33-lb64-lse": {
            "batch": 3, **gqa_kv, "causal": True, "align": "top-left", "kv_lengths": [18, 2, 33], "look_back": 64,
            "return_lse": True},
        "b3-hq4-hkv2-sq1-sk384-d64-scale-bias-causal-pre18x5x16-kv18x2x33-lse": {
            "batch": 3, **gqa_kv, "causal": True, "align": "top-left", "prefix_offset": [18, 5, 16],
            "kv_lengths": [18, 2, 33], "return_lse": True},
    }
    report = "\n".join(conversion.report())
    assert "data type 'i8' left out" not in report
    assert "axis 'transO': --transO true, false has no equivalent" in report and "merged" in report
    assert "-split_kv 4 dropped: flash decoding" in report
    assert "sliding" not in report
    assert "-schedule_version 2 dropped" in report and "-rand_min" not in report  # the data is imported:
    assert [d.name for d in suite.data_ranges] == ["real0to1"]  # -rand_type float -rand_min 0 -rand_max 1


def test_attention_last_valid_kv_index_lists_and_their_checks():
    head = '''
        directory = "Nightly"
        prefix = "rocmlir-gen"
        suffix = "--operation attention -t bf16 --arch %arch -pv | rocmlir-driver -c"
        [[suite]]
        name = "s"
    '''
    shape = "-seq_len_q 1 -seq_len_k 64 -head_dim_qk 32 -head_dim_v 32"
    tests = [
        f"-last_valid_kv_index=17,1,32 -g 3 {shape}",  # the newer name of -current_seq_len
        f"-last_valid_kv_index=5,5 -g 2 --prefix_offset=3,3 {shape}",  # one value for every batch; prefix implies causal
        f"-last_valid_kv_index=64 {shape}",  # an index must be below seq_len_k
        f"-current_seq_len=3,4 -g 3 {shape}",  # one per batch
        f"-last_valid_kv_index=33 -sliding_window_look_back=16 {shape}",
        f"-last_valid_kv_index=33 -sliding_window_look_back=-1 {shape}",  # -1: no window
        "-seq_len_q 8 -seq_len_k 8 -head_dim_qk 16",  # no -head_dim_v: rocmlir-gen refuses it
        "-num_heads_q 3 -num_heads_kv 2 -seq_len_q 8 -seq_len_k 8 -head_dim_qk 16 -head_dim_v 16",
        "-num_heads_q 4 -seq_len_q 8 -seq_len_k 8 -head_dim_qk 16 -head_dim_v 16",  # rocMLIR's kv heads default to 1
    ]
    conversion = convert_only(textwrap.dedent(head) + "".join(
        f'\n[[suite.test]]\nconfig = "{config}"\n' for config in tests))
    base = {"seq_q": 1, "seq_k": 64, "head_dim_qk": 32, "scale": 1.0}
    assert attention_configs(conversion) == {
        "b3-sq1-sk64-d32-kv18x2x33": {"batch": 3, **base, "kv_lengths": [18, 2, 33]},
        "b2-sq1-sk64-d32-causal-pre3-kv6": {"batch": 2, **base, "causal": True, "align": "top-left",
                                            "prefix_offset": 3, "kv_lengths": 6},
        "sq1-sk64-d32-kv34-lb16": {**base, "kv_lengths": 34, "look_back": 16},
        "sq1-sk64-d32-kv34": {**base, "kv_lengths": 34},
        "hq4-hkv1-sq8-sk8-d16": {"heads_q": 4, "heads_kv": 1, "seq_q": 8, "seq_k": 8, "head_dim_qk": 16, "scale": 1.0},
    }
    report = "\n".join(conversion.report())
    for expected in ("-last_valid_kv_index=64: the last valid key index must be below -seq_len_k 64; config skipped",
                     "-current_seq_len=3,4: 2 values for -g 3 (rocmlir-gen takes one per batch); config skipped",
                     "incomplete attention shape: no -head_dim_v; config skipped",
                     "-num_heads_q 3 is no multiple of -num_heads_kv 2; config skipped"):
        assert expected in report, expected


def test_attention_layouts_from_config_transposes_and_legacy_form():
    conversion = convert_only('''
        directory = "PrAttention"
        prefix = "rocmlir-gen"
        suffix = "--operation attention --arch %arch -pv | rocmlir-driver -c"
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "-seq_len_q 64 -seq_len_k 64 -head_dim_qk 64 -head_dim_v 64 --transK=false --transQ=true -t f16"
        [[suite.test]]
        config = "-seq_len_q 64 -seq_len_k 64 -head_dim_qk 64 -head_dim_v 64 --transK=true --transV=true --transO=true -t bf16"
        [[suite.test]]
        config = "-seq_len 384 -num_heads 64 -t f32"
    ''')
    [suite] = conversion.suites
    assert suite.axes["layouts"] == ("bhsd-qt-kt", "bhsd-vt")
    assert [(n.name, sorted(n.config.kept)) for n in suite.configs] == [
        ("sq64-sk64-d64", [CaseKey("fwd", "f16", "bhsd-qt-kt")]), ("sq64-sk64-d64-2", [CaseKey("fwd", "bf16", "bhsd-vt")])]
    report = "\n".join(conversion.report())
    assert "--transO=true dropped: the output's storage order" in report
    assert "-seq_len 384 -num_heads 64: rocmlir-gen's first attention interface" in report


@pytest.mark.skipif(not attention_op_registered(), reason="the attention op is not registered yet")
def test_attention_catalogues_load_and_expand():
    for text in (PR_ATTENTION_F16, ATTENTION_SCHEDULE):
        conversion, cases = convert_text(text)
        assert cases and {c.op for c in cases} == {"attention"}
        expected = sum(len(named.config.kept) for suite in conversion.suites for named in suite.configs)
        assert len(cases) == expected
    prefix = [c for c in cases if c.config.endswith("pre18x5x16-kv18x2x33-lse")]
    assert len(prefix) == 16  # f16, bf16 x 8 layouts; transO merged
    params = prefix[0].params
    assert params["kv_lengths"] == [18, 2, 33] and params["prefix_offset"] == [18, 5, 16] and params["scale"] == 1.0


# ---------------------------------------------------------------- gemm_gemm, conv_gemm, -p

def test_gemm_gemm_shapes_layouts_and_merged_transO():
    """rocmlir-gen's gemm_gemm: A (g, m, k), B (g, k, n), C (g, n, gemmO); --transA/B/C store each transposed."""
    conversion, cases = convert_text(HEADER.replace("--arch", "--operation gemm_gemm -t f16 --arch") + '''
        [[axis]]
        name = "transB"
        values = ["true", "false"]
        prefix = "--transB="
        [[axis]]
        name = "transC"
        values = ["true", "false"]
        prefix = "--transC="
        [[axis]]
        name = "transO"
        values = ["true", "false"]
        prefix = "--transO="
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "-m 384 -n 384 -k 64 -gemmO 64"
        [[suite.test]]
        config = "-g 4 --transA=true -m 64 -n 32 -k 16 -gemmO 8 -perf_config attn:v2:32,32,64,32,32,32,4,1,1,2,1"
        [[suite.test.exclude]]
        name = "transC"
        values = ["true"]
        [[suite.test]]
        config = "-g 1 -m 64 -n 32 -k 16"
    ''')
    [suite] = conversion.suites
    assert (suite.op, suite.axes["dtypes"]) == ("gemm_gemm", ("f16",))
    assert suite.axes["layouts"] == ("ntt", "ntn", "nnt", "nnn", "ttn", "tnn")  # A, B, C; rocMLIR's order
    assert {named.name: dict(named.config.params) for named in suite.configs} == {
        "m384-n384-k64-o64": {"m": 384, "n": 384, "k": 64, "o": 64},  # g = 1: a plain product
        "b4-m64-n32-k16-o8": {"batch": 4, "m": 64, "n": 32, "k": 16, "o": 8},
    }
    assert ids(cases, "m384-n384-k64-o64") == {("fwd", "f16", layout) for layout in ("ntt", "ntn", "nnt", "nnn")}
    assert ids(cases, "b4-m64-n32-k16-o8") == {("fwd", "f16", "ttn"), ("fwd", "f16", "tnn")}  # transC=true excluded
    assert len(cases) == 6  # transO merged: each case once
    assert all("max_rel_diff" not in c.tolerances for c in cases)  # relDiff gates f32 outputs only
    report = "\n".join(conversion.report())
    assert "axis 'transO': --transO true, false has no equivalent in e2egen (the output's storage order" in report
    assert "merged" in report and "-perf_config attn:v2:32,32,64,32,32,32,4,1,1,2,1 dropped" in report
    assert "incomplete gemm_gemm shape: no -gemmO; config skipped" in report


def test_conv_gemm_layout_families_transC_and_checks():
    """rocmlir-gen's conv_gemm: the conv (filter, input layouts; no conv output tensor) then C (k, gemmO)."""
    conversion, cases = convert_text(HEADER.replace("--arch", "--operation conv_gemm -t bf16 --arch") + f'''
        [[axis]]
        name = "transC"
        values = ["true", "false"]
        prefix = "--transC="
        [[axis]]
        name = "layout"
        values = ["-fil_layout=gkcyx -in_layout=ngchw", "-fil_layout=gkyxc -in_layout=nhwgc", "-fil_layout=gkcyx -in_layout=nhwgc"]
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "-groupsize=1 {CONV} -dilation_h=2 -dilation_w=2 -padding_h_l=1 -padding_h_r=1 -padding_w_l=1 -padding_w_r=1 -gemmO=16"
        [[suite.test]]
        config = "{CONV} -conv_stride_h=2 -conv_stride_w=2 -padding_h_l=0 -padding_h_r=1 -padding_w_l=0 -padding_w_r=1 -gemmO=16 -out_layout=ngkhw"
        [[suite.test]]
        config = "-groupsize=2 {CONV} -gemmO=16"
        [[suite.test]]
        config = "{CONV}"
    ''')
    [suite] = conversion.suites
    assert suite.op == "conv_gemm"
    assert suite.axes["layouts"] == ("nchw-t", "nhwc-t", "nchw-n", "nhwc-n")
    assert {named.name: dict(named.config.params) for named in suite.configs} == {
        "n2-c4-k8-6x6-f3x3-p1-d2-o16": {"n": 2, "c": 4, "k": 8, "hw": [6, 6], "kernel": [3, 3], "pad": [1, 1],
                                        "dilation": [2, 2], "o": 16},
        "n2-c4-k8-6x6-f3x3-s2-p0_1-o16": {"n": 2, "c": 4, "k": 8, "hw": [6, 6], "kernel": [3, 3], "stride": [2, 2],
                                          "pad": [[0, 1], [0, 1]], "o": 16},
    }
    assert len(cases) == 2 * 4 and {c.op for c in cases} == {"conv_gemm"}
    report = "\n".join(conversion.report())
    assert "conv layout -fil_layout=gkcyx -in_layout=nhwgc" in report and "left out" in report  # mixed families
    assert "-out_layout=ngkhw: conv_gemm has no conv output tensor" in report
    assert "-groupsize=2: rocmlir-gen's conv_gemm has one group" in report
    assert "incomplete conv_gemm shape: no -gemmO; config skipped" in report


def test_gemm_transC_is_the_output_order_and_merged():
    conversion, cases = convert_text(HEADER.replace("--arch", "--operation gemm --arch") + '''
        [[axis]]
        name = "transC"
        values = ["true", "false"]
        prefix = "--transC="
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "-m 8 -n 16 -k 4"
        [[suite.test.exclude]]
        name = "transC"
        values = ["false"]
    ''')
    assert conversion.suites[0].axes["layouts"] == ("nn",)
    assert len(cases) == 1
    report = "\n".join(conversion.report())
    assert "axis 'transC': --transC=true dropped: gemm's output storage order" in report and "merged" in report


def test_populate_defaults_gives_rocmlir_gen_default_problem():
    """-p is rocmlir-gen's populateDefaults(): the op's default sizes, over any sizes given; -p=false: none."""
    def configs(operation: str, *tests: str):
        header = HEADER.replace("--arch", f"--operation {operation} -t f16 --arch")
        conversion, cases = convert_text(header + '\n[[suite]]\nname = "s"\n' + "".join(
            f'[[suite.test]]\nconfig = "{config}"\n' for config in tests))
        assert cases
        return conversion, {named.name: dict(named.config.params) for s in conversion.suites for named in s.configs}

    conversion, conv = configs("conv", "-p", f"-p=false {CONV} --padding_h=1 --padding_w=1",
                               f"-p {CONV} -padding_h_l=2 -padding_h_r=1 -g 2")
    default_conv = {"n": 128, "c": 8, "k": 128, "hw": [32, 32], "kernel": [3, 3]}
    assert conv == {"n128-c8-k128-32x32-f3x3": default_conv, "n2-c4-k8-6x6-f3x3-p1": {**dict(
        n=2, c=4, k=8, hw=[6, 6], kernel=[3, 3]), "pad": [1, 1]}, "n128-c8-k128-32x32-f3x3-2": default_conv}
    report = "\n".join(conversion.report())
    assert "ignored: t.toml:12: test 3 config: -p (populate default values): rocmlir-gen replaces -batchsize=2" in report
    assert "-padding_h_l=2 -padding_h_r=1 -g 2 by its default conv2d problem" in report
    assert configs("conv_gemm", "-p")[1] == {"n128-c8-k128-32x32-f3x3-o769": {**default_conv, "o": 769}}
    assert configs("gemm", "-p -g 3 -m 8")[1] == {"m1024-n512-k769": {"m": 1024, "n": 512, "k": 769}}
    assert configs("gemm_gemm", "-p")[1] == {"m1024-n512-k769-o769": {"m": 1024, "n": 512, "k": 769, "o": 769}}
    assert configs("attention", "-p -causal")[1] == {"sq1024-sk1024-d32-causal": {
        "seq_q": 1024, "seq_k": 1024, "head_dim_qk": 32, "scale": 1.0, "causal": True, "align": "top-left"}}


# The real catalogues (ROCm/rocMLIR mlir/test/e2e, as stored for this project); skipped where absent.
ROCMLIR_E2E = Path("/work/shared/rocmlir-e2e")
FUSED = sorted(ROCMLIR_E2E.glob("*ElementwiseGemm*.toml"))
MERGED_ONLY = ("axis 'transO'", "-perf_config", "axis 'splitKFactor'", "schedule_version", "-rand_type", "-rand_min",
               "-rand_max")


def rocmlir_keys(path: Path) -> dict[str, set[tuple[str, str]]]:
    """rocMLIR's own expansion of a fused catalogue, read independently of the importer: per config
    string, the (dtype, layout) pairs its runs need (layout as e2egen names it; transO ignored)."""
    data = tomllib.loads(path.read_text())
    suffix = data["suffix"].split("|")[0]
    axes = data.get("axis", [])
    keys: dict[str, set[tuple[str, str]]] = {}
    for suite in data["suite"]:
        for test in suite["test"]:
            for values in itertools.product(*[[(a["name"], v) for v in a["values"]] for a in axes]):
                chosen = dict(values)
                if test.get("exclude") and all(chosen.get(e["name"]) in e["values"] for e in test["exclude"]):
                    continue
                words = " ".join(a.get("prefix", "") + chosen[a["name"]] for a in axes)
                [dtype] = re.findall(r"-t (\w+)", words) or re.findall(r"-t (\w+)", suffix)
                letters = {name: "t" if f"--{name}=true" in words or f"--{name}=true" in test["config"] else "n"
                           for name in ("transA", "transB", "transC")}
                if "conv_gemm" in suffix:
                    layout = ("nhwc" if "gkyxc" in words else "nchw") + "-" + letters["transC"]
                else:
                    layout = "".join(letters.values())
                keys.setdefault(test["config"], set()).add((dtype, layout))
    return keys


@pytest.mark.skipif(not FUSED, reason="rocMLIR's catalogues are not here")
@pytest.mark.parametrize("source", FUSED, ids=[p.stem for p in FUSED])
def test_real_fused_catalogues_lose_no_case(source):
    conversion = convert(read_rocmlir(source.read_text(), source.name))
    lost = [line for line in conversion.report() if line.startswith("not imported")
            and not any(merged in line for merged in MERGED_ONLY)]
    assert not lost, lost  # only merged axes and dropped tuning/data flags: every rocMLIR case has its e2egen case
    imported = {named.config.rocmlir_test.config: {(k.dtype, k.layout) for k in named.config.kept}
                for suite in conversion.suites for named in suite.configs}
    assert imported == rocmlir_keys(source)
    cases = rocmlir_cases(parse_catalogue(conversion.to_toml(), source.name))
    assert len(cases) == sum(len(keys) for keys in imported.values())
    assert {c.op for c in cases} == {"conv_gemm" if "Conv" in source.name else "gemm_gemm"}


@pytest.mark.skipif(not (ROCMLIR_E2E / "conv2d_regression_fwd.toml").exists(), reason="rocMLIR's catalogues are not here")
def test_real_catalogues_with_p_and_asymmetric_padding():
    conversions = {name: convert(read_rocmlir((ROCMLIR_E2E / f"{name}.toml").read_text(), f"{name}.toml"))
                   for name in ("conv2d_regression_fwd", "conv2d_regression_bwd")}
    names = [named.name for named in conversions["conv2d_regression_fwd"].suites[0].configs]
    # config = "-p", "-p -rand_side filter", "-p -rand_side input": the default problem three times
    assert names[:3] == ["n128-c8-k128-32x32-f3x3", "n128-c8-k128-32x32-f3x3-2", "n128-c8-k128-32x32-f3x3-3"]
    [asymmetric] = [named for suite in conversions["conv2d_regression_bwd"].suites for named in suite.configs
                    if "p2_1x2_0" in named.name]  # -padding_h_l=2 -padding_h_r=1 -padding_w_l=2 -padding_w_r=0
    assert dict(asymmetric.config.params)["pad"] == [[2, 1], [2, 0]]
    for name, conversion in conversions.items():
        assert not [line for line in conversion.report() if "config skipped" in line]
        cases = rocmlir_cases(parse_catalogue(conversion.to_toml(), name))
        assert len(cases) == sum(len(named.config.kept) for suite in conversion.suites for named in suite.configs)


def test_other_conv_orders_import_as_layout_strings_and_3d_digits_on_2d_drop_the_depth():
    conversion, cases = convert_text(HEADER + f'''
        [[axis]]
        name = "layout"
        values = ["-fil_layout=yxck -in_layout=nhwc -out_layout=nhwk", "-fil_layout=kc012 -in_layout=nc012 -out_layout=nk012"]
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{CONV}"
    ''')
    assert {c.layout for c in cases} == {"nhwc-yxck-nhwk", "nc01-kc01-nk01"}


# ---------------------------------------------------------------- issue 19: data, thresholds, flags, outcomes, summary

SEEDED = '''
directory = "Nightly"
prefix = "rocmlir-gen"
suffix = "--arch %arch -pv %random_data {extra} | rocmlir-driver -c"
'''
GEMM_CFG = "-m 8 -n 8 -k 16"


def seeded(extra: str = "", body: str = "") -> str:
    return SEEDED.format(extra=extra) + body


def test_seeded_integer_data_is_imported_and_f32_results_are_exact():
    conversion, cases = convert_text(seeded("-relDiff_threshold 1e-6", f'''
        [[axis]]
        name = "data type"
        values = ["f32"]
        prefix = "-t "
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{CONV}"
    '''))
    text = conversion.to_toml()
    assert 'int-5to4 = {range = [-5, 4], data = "integers"}' in text
    assert {(c.key.range, c.data, c.lo, c.hi) for c in cases} == {("int-5to4", "integers", -5.0, 4.0)}
    report = "\n".join(conversion.report())
    assert "pv: rocMLIR's CPU validation" in report and "%random_data: rocMLIR's seeded random inputs" in report
    assert "-pv %random_data" not in report  # -pv is a switch: the next word is a lit substitution, not its value
    from e2egen import metrics, runner

    [case] = cases
    result = runner.run(case.problem())
    comparison = metrics.compare(result.ref, result.out, dtype=result.out_dtype)
    assert comparison.max_rel_diff == 0.0  # what rocMLIR's relDiff 1e-6 for f32 assumes, on its own data
    assert case.verifier.rel_diff == 1e-6


def test_float_data_ranges_per_config_and_one_random_side():
    conversion, cases = convert_text(seeded("-rand_min -1 -rand_max 1", f'''
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "-rand_type float {CONV}"
        [[suite.test]]
        config = "-batchsize=1 -in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3"
        [[suite.test]]
        config = "-rand_type float -rand_side filter -batchsize=3 -in_channels=4 -out_channels=8 -in_h=6 -in_w=6 -fil_h=3 -fil_w=3"
    '''))
    by_config = {}
    for case in cases:
        by_config.setdefault(case.config, set()).add((case.key.range, case.data))
    assert by_config == {
        "n2-c4-k8-6x6-f3x3": {("real-1to1", "uniform")},
        "n1-c4-k8-6x6-f3x3": {("int-5to4", "integers")},
        "n3-c4-k8-6x6-f3x3": {("real-1to1-random-w", "uniform random=w")},  # -rand_side filter: only w drawn
    }
    report = "\n".join(conversion.report())
    assert "-rand_side" not in report
    _, fixed_cases = convert_text(HEADER + f'''
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{CONV}"
    ''')
    assert {(c.key.range, c.data) for c in fixed_cases} == {("pattern", "pattern")}  # no -rand: the fixed pattern


def test_fixed_pattern_is_imported_not_reported():
    conversion, _ = convert_text(HEADER + f'''
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{CONV}"
    ''')
    assert not any("pattern" in line or "-rand" in line for line in conversion.report())


def test_per_dtype_threshold_in_an_axis_value_becomes_a_per_dtype_tolerance():
    conversion, cases = convert_text(seeded("-relDiff_threshold 0.00004", f'''
        [[axis]]
        name = "data type"
        values = ["f32", "f16 -RMS_threshold=0.0007 -relDiff_threshold=0.5", "bf16"]
        prefix = "-t "
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{CONV}"
    '''))
    rms = {c.dtype: c.verifier.rms for c in cases}
    rel = {c.dtype: c.verifier.rel_diff for c in cases}
    assert rms == {"f32": 0.0, "f16": 0.0007, "bf16": 0.0}  # f16 from the axis value; 0: the verifier's defaults
    assert rel == {"f32": 4e-05, "f16": 4e-05, "bf16": 4e-05}  # the verifier itself switches it off for f16/bf16
    assert any("-relDiff_threshold for f16: rocMLIR's verifier switches relDiff off" in line for line in conversion.report())


def test_flags_with_and_without_meaning_here_are_reported_by_reason():
    conversion, cases = convert_text(seeded("-mfma=on -wmma=infer", f'''
        [[axis]]
        name = "operation"
        values = ["conv2d", "conv2d_bwd_data"]
        prefix = "--operation "
        [[axis]]
        name = "v4r1"
        values = ["0", "1"]
        prefix = "-v4r1 "
        when = {{ operation = "conv2d" }}
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "{CONV}"
        [[suite.test]]
        config = "{CONV} -out_dtype f16"
    '''))
    report = "\n".join(conversion.report())
    assert "ignored: t.toml:4: suffix: -mfma=on: whether the GPU kernel uses MFMA instructions" in report
    assert "-wmma=infer: whether the GPU kernel uses WMMA" in report
    assert "`when = {'operation': 'conv2d'}`: rocMLIR's generateE2ETest.py does not read `when`" in report
    assert "output type 'f16' (-out_dtype f16) left out: e2egen's f32 cases write f32" in report
    assert all("-v4r1" in line for line in report.splitlines() if "unknown rocmlir-gen flag" in line)
    reasons = {(c.test, c.expressed, c.reason) for c in conversion.cases}
    assert (2, False, "output type f16 (-out_dtype)") in reasons
    assert {c.test for c in conversion.cases if c.expressed} == {1}
    assert len(conversion.cases) == 2 * 2 * 2  # tests x operation x v4r1
    assert len(cases) == 2  # v4r1 merged: fwd and bwd_data of test 1


def test_scaled_gemm_axis_of_f32_gemm_is_left_out_by_reason():
    conversion, cases = convert_text(seeded("", f'''
        [[axis]]
        name = "scaledGemm"
        values = ["true"]
        prefix = "--scaledGemm="
        [[suite]]
        name = "s"
        [[suite.test]]
        config = "--operation gemm {GEMM_CFG}"
    '''))
    assert not conversion.suites and cases == []
    assert [c.reason for c in conversion.cases] == ["data type f32 (scaled gemm)"]  # scaled_gemm: fp8 and fp4 only


NOTHING = SEEDED.format(extra="-t f8E8M0FNU") + f'''
[[suite]]
name = "s"
[[suite.test]]
config = "{CONV}"
'''


def test_nothing_imported_has_its_own_exit_status_and_writes_no_catalogue(capsys, tmp_path):
    source = tmp_path / "F4.toml"
    source.write_text(NOTHING)
    out, summary = tmp_path / "out.toml", tmp_path / "summary.json"
    status, stdout, err = run_import(capsys, source, "-o", out, "--summary", summary)
    assert status == 3 and stdout == "" and not out.exists()
    assert "nothing could be imported" in err and "Traceback" not in err
    import json

    [entry] = json.loads(summary.read_text())["files"]
    assert entry == {"file": "F4.toml", "rocmlir_cases": 1, "expressed": 0, "not_expressed": {"data type f8E8M0FNU": 1},
                     "suites": 0, "configs": 0, "e2egen_cases": 0, "items_not_imported": 2}


def test_invalid_toml_is_still_a_usage_error(capsys, tmp_path):
    source = tmp_path / "Bad.toml"
    source.write_text("suite = [\n")
    status, _, err = run_import(capsys, source, "-o", tmp_path / "out.toml")
    assert status == 2 and not (tmp_path / "out.toml").exists() and "Bad.toml" in err


def test_several_files_write_what_imports_and_summarize_every_file(capsys, tmp_path):
    import json

    (tmp_path / "F4.toml").write_text(NOTHING)
    (tmp_path / "Bad.toml").write_text("suite = [\n")
    out_dir, summary, page = tmp_path / "out", tmp_path / "s.json", tmp_path / "s.md"
    status, _, err = run_import(capsys, RESNET, GEMM, tmp_path / "F4.toml", tmp_path / "Bad.toml",
                                "--out-dir", out_dir, "--summary", summary, "--summary-md", page)
    assert status == 3
    assert sorted(p.name for p in out_dir.iterdir()) == ["PrGemm.e2e.toml", "PrResnet50.e2e.toml"]
    data = json.loads(summary.read_text())
    files = {f["file"]: f for f in data["files"]}
    assert files["PrResnet50.toml"]["expressed"] == files["PrResnet50.toml"]["rocmlir_cases"] == 46
    assert files["PrResnet50.toml"]["e2egen_cases"] == 46
    assert "error" in files["Bad.toml"] and files["F4.toml"]["not_expressed"] == {"data type f8E8M0FNU": 1}
    totals = data["totals"]
    assert (totals["files"], totals["files_imported"], totals["files_nothing_imported"], totals["files_unreadable"]) == (4, 2, 1, 1)
    assert totals["rocmlir_cases"] == sum(f["rocmlir_cases"] for f in data["files"])
    assert totals["expressed"] + sum(totals["not_expressed"].values()) == totals["rocmlir_cases"]
    text = page.read_text()
    assert "| PrResnet50.toml | 46 | 46 | 46 |" in text and "data type f8E8M0FNU" in text
    assert "4 files: 2 imported, 1 with nothing to import, 1 unreadable" in err


def test_one_output_file_for_several_catalogues_is_a_usage_error(capsys, tmp_path):
    status, _, err = run_import(capsys, RESNET, GEMM, "-o", tmp_path / "x.toml")
    assert status == 2 and "use --out-dir" in err


def test_summary_counts_every_case_rocmlir_runs(capsys, tmp_path):
    """Expressed and not-expressed cases add up to rocMLIR's own expansion (tests x kept combinations)."""
    conversion = convert(read_rocmlir(GEMM.read_text(), str(GEMM)))
    rocmlir = read_rocmlir(GEMM.read_text(), str(GEMM))
    expected = 0
    for suite in rocmlir.suites:
        for test in suite.tests:
            for combination in itertools.product(*[[(a, v) for v in a.values] for a in rocmlir.axes]):
                values = {a.name: v for a, v in combination}
                excluded = test.excludes and all(values.get(e.axis) in e.values for e in test.excludes)
                expected += not excluded
    assert len(conversion.cases) == expected
