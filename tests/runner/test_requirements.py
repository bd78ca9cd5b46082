"""What a case requires of a kernel's arithmetic (`require`), the deviations a catalogue accepts (`[[accept]]`),
and how a run judges the measured arithmetic against them."""
from __future__ import annotations

import dataclasses
import json
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TINY_CONV, TINY_GEMM, catalogue_text, line_number, problems_of, run_cli
from e2egen.generator import codec
from e2egen.generator.cases import Case, expand
from e2egen.generator.layers import resolve_with_sources
from e2egen.generator.loader import load_catalogue, parse_catalogue
from e2egen.runner.arithmetic.model import FORMAT_BITS, INPUT_FORMATS, ROUNDINGS, Arithmetic
from e2egen.runner.arithmetic.requirements import Acceptance, judge, violations
from e2egen.runner.errors import ProblemError
from e2egen.runner.options import (ACC_REQUIREMENTS, INPUT_REQUIREMENTS, ROUNDING_REQUIREMENTS,
                                   SUBNORMAL_REQUIREMENTS, Requirements)

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths

ACCEPT_CPU = """
[[accept]]
device = "cpu"
require = ["acc"]
reason = "torch's CPU f16 backward convs keep per-tap partials in f16"
"""


def cases_of(text: str) -> list[Case]:
    return expand(parse_catalogue(text, "configs.toml"))


# -- the options ----------------------------------------------------------------------------
require_tables = st.fixed_dictionaries({}, optional={
    "inputs": st.sampled_from(INPUT_REQUIREMENTS), "acc": st.sampled_from(ACC_REQUIREMENTS),
    "rounding": st.sampled_from(ROUNDING_REQUIREMENTS), "subnormals": st.sampled_from(SUBNORMAL_REQUIREMENTS)})


@given(require_tables)
def test_requirements_round_trip_through_their_catalogue_table(table):
    required = Requirements.from_catalogue(table)
    assert Requirements.from_catalogue(required.to_catalogue()) == required
    assert {**Requirements.defaults(), **table} == required.to_catalogue()
    assert json.loads(json.dumps(required.to_catalogue())) == required.to_catalogue()


def test_requirements_default_to_the_default_policy():
    """Inputs not below the case's dtype, f32 partial sums and f32 element-wise math (generator.defaults)."""
    assert Requirements().to_catalogue() == {"inputs": "exact", "acc": "f32", "rounding": "any", "subnormals": "any",
                                             "compute": "f32"}
    with pytest.raises(ProblemError) as info:
        Requirements(acc="f8")
    assert info.value.key == "require.acc" and "unknown accumulator requirement 'f8'" in str(info.value)


# -- the loader -----------------------------------------------------------------------------
def test_require_and_accept_load_at_every_level():
    top = '[require]\nacc = "f32"\n[require.f16]\nsubnormals = "kept"\n[require.bwd_data]\nrounding = "nearest"\n'
    text = catalogue_text(top, TINY_CONV + 'require = { f16 = { bwd_data = { acc = "f16" } } }\n', TINY_GEMM, ACCEPT_CPU,
                          '[[accept]]\ndevice = "NVIDIA *"\nimpl = "torch"\ncells = "conv2d/bwd_*/f16/*"\n'
                          'require = ["inputs", "rounding"]\nreason = "tensor cores"\n')
    catalogue = parse_catalogue(text, "configs.toml")
    assert dict(catalogue.require.common) == {"acc": "f32"}
    assert dict(catalogue.require.specific["f16"]) == {"subnormals": "kept"}
    assert dict(catalogue.suites[0].configs[0].require.specific["f16.bwd_data"]) == {"acc": "f16"}
    assert catalogue.accepted == (
        Acceptance(device="cpu", reason="torch's CPU f16 backward convs keep per-tap partials in f16", requirements=("acc",)),
        Acceptance(device="NVIDIA *", reason="tensor cores", requirements=("inputs", "rounding"), impl="torch",
                   cells="conv2d/bwd_*/f16/*"),
    )
    cases = expand(catalogue)
    assert all(case.accepted == catalogue.accepted for case in cases)


def test_a_catalogue_without_require_gives_the_default_requirements():
    cases = cases_of(catalogue_text(TINY_CONV, TINY_GEMM))
    assert {case.require for case in cases} == {Requirements()} and all(case.accepted == () for case in cases)


@pytest.mark.parametrize("extra, key, expect", [
    ('[require]\nacc = "f8"\n', "require.acc", ["unknown accumulator requirement 'f8'", "any, bf16, f16, f32, f64"]),
    ('[require]\ninputz = "exact"\n', "require.inputz", ["unknown require key 'inputz'", "did you mean 'inputs'"]),
    ('[require.f16]\nrounding = "up"\n', "require.f16.rounding", ["unknown rounding requirement 'up'", "any, nearest"]),
    ('[require.f16.bwd_data]\nsubnormals = "flushed"\n', "require.f16.bwd_data.subnormals",
     ["unknown subnormal requirement 'flushed'", "any, kept"]),
    ('[require.f16.bwd_data]\nacc = 32\n', "require.f16.bwd_data.acc", ["unknown accumulator requirement 32", "f32"]),
])
def test_bad_require_values_name_the_key_the_value_and_the_choices(extra, key, expect):
    text = catalogue_text(extra, TINY_CONV)
    [message] = problems_of(text)
    assert message.startswith(f"configs.toml:{line_number(text, extra.splitlines()[-1])}: {key}: "), message
    assert all(part in message for part in expect), message


def test_bad_require_in_a_suite_and_a_config():
    text = catalogue_text(TINY_CONV.replace('ranges = ["r0"]', 'ranges = ["r0"]\nrequire = { inputs = "tf31" }')
                          + 'require = { f32 = { acc = "fp32" } }\n')
    messages = problems_of(text)
    assert any(m.startswith(f"configs.toml:{line_number(text, 'tf31')}: suite[0].require.inputs: ")
               and "'tf31'" in m and "did you mean 'tf32'" in m and "any, bf16, exact, f16, tf32" in m for m in messages), messages
    assert any("suite[0].config[0].require.f32.acc" in m and "did you mean 'f32'" in m for m in messages), messages


@pytest.mark.parametrize("entry, key, expect", [
    ('require = ["acc"]\nreason = "r"\n', "accept[0].device", ["missing", '"cpu"']),
    ('device = "cpu"\nreason = "r"\n', "accept[0].require", ["missing", "acc, compute, inputs, rounding, subnormals"]),
    ('device = "cpu"\nrequire = ["acc"]\n', "accept[0].reason", ["missing"]),
    ('device = "cpu"\nrequire = ["acc"]\nreason = "  "\n', "accept[0].reason", ["non-empty string"]),
    ('device = "cpu"\nrequire = ["acc"]\nreason = 3\n', "accept[0].reason", ["non-empty string", "an integer (3)"]),
    ('device = "cpu"\nrequire = []\nreason = "r"\n', "accept[0].require", ["non-empty list", "acc, compute, inputs, rounding, subnormals"]),
    ('device = "cpu"\nrequire = "acc"\nreason = "r"\n', "accept[0].require", ["non-empty list", "a string ('acc')", "acc, compute, inputs"]),
    ('device = "cpu"\nrequire = ["acc", "accumulator"]\nreason = "r"\n', "accept[0].require[1]",
     ["unknown requirement 'accumulator'", "acc, compute, inputs, rounding, subnormals"]),
    ('device = "cpu"\nrequire = ["acc", "acc"]\nreason = "r"\n', "accept[0].require[1]", ["listed twice"]),
    ('device = 3\nrequire = ["acc"]\nreason = "r"\n', "accept[0].device", ["glob", "an integer (3)"]),
    ('device = "cpu"\nimpl = ""\nrequire = ["acc"]\nreason = "r"\n', "accept[0].impl", ["non-empty glob"]),
    ('devices = "cpu"\ndevice = "cpu"\nrequire = ["acc"]\nreason = "r"\n', "accept[0].devices",
     ["unknown accept key 'devices'", "did you mean 'device'", "cells, device, impl, reason, require"]),
    ('device = "cpu"\ncells = "conv4d/*"\nrequire = ["acc"]\nreason = "r"\n', "accept[0].cells",
     ["unknown op 'conv4d' in cells 'conv4d/*'", "conv2d", "gemm"]),
    ('device = "cpu"\ncells = "conv2d/bwd_dat/f16/*"\nrequire = ["acc"]\nreason = "r"\n', "accept[0].cells",
     ["unknown direction 'bwd_dat' in cells", "did you mean 'bwd_data'", "bwd_weight, fwd"]),
    ('device = "cpu"\ncells = "gemm/fwd/fp16/*"\nrequire = ["acc"]\nreason = "r"\n', "accept[0].cells",
     ["'fp16'", "did you mean 'f16'", "bf16, f16, f32, f4e2m1, f8e4m3fn"]),
    ('device = "cpu"\ncells = "gemm/fwd/f16/nhwc"\nrequire = ["acc"]\nreason = "r"\n', "accept[0].cells",
     ["'nhwc'", "nn, nt, tn, tt"]),
    ('device = "cpu"\ncells = "a/b/c/d/e/f"\nrequire = ["acc"]\nreason = "r"\n', "accept[0].cells",
     ["6 parts", "op/direction/dtype/layout"]),
])
def test_bad_accept_entries_name_the_key_the_value_and_the_choices(entry, key, expect):
    text = catalogue_text(TINY_CONV, "\n[[accept]]\n" + entry)
    [message] = problems_of(text)
    assert message.startswith("configs.toml:") and f": {key}: " in message, message
    assert all(part in message for part in expect), message
    line = int(message.split(":")[1])
    assert line >= line_number(text, "[[accept]]"), message


def test_accept_must_be_an_array_of_tables():
    [message] = problems_of('accept = "cpu"\n' + catalogue_text(TINY_CONV))
    assert "accept: expected [[accept]] tables" in message


def test_cells_globs_with_wildcards_before_a_part_are_not_second_guessed():
    text = catalogue_text(TINY_CONV, '\n[[accept]]\ndevice = "*"\ncells = "*/f16/*"\nrequire = ["acc"]\nreason = "r"\n')
    assert parse_catalogue(text, "configs.toml").accepted[0].cells == "*/f16/*"


def test_validate_exits_2_naming_the_accept_key(write_catalogue):
    path = write_catalogue(catalogue_text(TINY_CONV, '\n[[accept]]\ndevice = "cpu"\nrequire = ["acc", "precision"]\nreason = "r"\n'))
    result = run_cli("validate", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "accept[0].require[1]" in result.stderr and "'precision'" in result.stderr
    assert "acc, compute, inputs, rounding, subnormals" in result.stderr and str(path) in result.stderr


# -- layering ------------------------------------------------------------------------------
def test_a_configs_dtype_direction_require_overrides_the_top_level():
    top = '[require]\nacc = "f32"\nsubnormals = "kept"\n'
    text = catalogue_text(top, TINY_CONV + 'require.f16.bwd_data.acc = "f16"\n')
    required = {(c.dtype, c.direction): c.require for c in cases_of(text)}
    assert required[("f16", "bwd_data")] == Requirements(acc="f16", subnormals="kept")
    assert required[("f16", "fwd")] == required[("f32", "bwd_data")] == Requirements(acc="f32", subnormals="kept")
    catalogue = parse_catalogue(text, "configs.toml")
    value, source = resolve_with_sources(catalogue, "tiny", "c4", "f16", "bwd_data", "require")["acc"]
    assert value == "f16" and source.label("acc", "require") == "tiny/c4: require.f16.bwd_data.acc"


def test_suite_require_sits_between_the_top_level_and_the_config():
    text = catalogue_text('[require.f16]\ninputs = "any"\nacc = "f32"\n',
                          TINY_CONV.replace('ranges = ["r0"]', 'ranges = ["r0"]\nrequire = { bwd_weight = { acc = "bf16" } }'))
    required = {(c.dtype, c.direction): c.require for c in cases_of(text)}
    assert required[("f16", "bwd_weight")] == Requirements(inputs="any", acc="bf16")  # the suite's scope wins
    assert required[("f16", "fwd")] == Requirements(inputs="any", acc="f32")
    assert required[("f32", "fwd")] == Requirements()


# -- codec and JSON form -----------------------------------------------------------------
accept_entries = st.lists(st.fixed_dictionaries(
    {"device": st.sampled_from(["cpu", "NVIDIA*", "*"]),
     "require": st.lists(st.sampled_from(Requirements.catalogue_keys()), min_size=1, unique=True),
     "reason": st.text(st.characters(whitelist_categories=("L", "N", "Zs", "Pd", "Po"), max_codepoint=0x2fff,
                                     blacklist_characters='"\\'),
                       min_size=1, max_size=20).filter(str.strip)},
    optional={"impl": st.sampled_from(["*", "torch", "arithmetic_kernels:*"]),
              "cells": st.sampled_from(["*", "gemm/*", "conv2d/bwd_*/f16/*", "*/f16/*"])}), max_size=3)


def _toml_table(table: dict) -> str:
    return "".join(f"{key} = {json.dumps(value, ensure_ascii=False)}\n" for key, value in table.items())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(require_tables, require_tables, accept_entries)
def test_codec_and_json_round_trip_requirements_and_accepted_deviations(top, config_f16, entries):
    text = catalogue_text("[require]\n" + _toml_table(top), TINY_CONV + "[suite.config.require.f16]\n" + _toml_table(config_f16),
                          TINY_GEMM, *("\n[[accept]]\n" + _toml_table(entry) for entry in entries))
    cases = cases_of(text)
    assert all(len(case.accepted) == len(entries) for case in cases)
    assert all(case.require == Requirements.from_catalogue({**top, **(config_f16 if case.dtype == "f16" else {})})
               for case in cases)
    for suite in ("tiny", "mm"):
        suite_cases = [c for c in cases if c.suite == suite]
        tables = codec.encode(suite_cases)
        again = [c for c in cases_of(text) if c.suite == suite]  # a second expansion writes the same module
        assert repr(codec.encode(again)) == repr(tables)
        assert codec.decode(eval(repr(tables)), suite_cases[0].impl) == suite_cases  # noqa: S307 - our own literals
    for case in cases:
        data = json.loads(json.dumps(case.to_dict()))
        assert Case.from_dict(data) == case
        assert data["require"] == case.require.to_catalogue() and len(data["accepted"]) == len(entries)


def test_a_record_written_before_requirements_reads_back_with_the_defaults():
    case = cases_of(catalogue_text(TINY_GEMM))[0]
    data = {k: v for k, v in case.to_dict().items() if k not in ("require", "accepted")}
    assert Case.from_dict(data) == case


def test_cases_refuse_untyped_requirements():
    case = cases_of(catalogue_text(TINY_GEMM))[0]
    with pytest.raises(TypeError):
        dataclasses.replace(case, require={"acc": "f32"})
    with pytest.raises(TypeError):
        dataclasses.replace(case, accepted=[Acceptance("cpu", "r", ("acc",))])


# -- violations on hand-built arithmetic ------------------------------------------------------
def keys(found) -> list[str]:
    return [v.key for v in found]


def test_inputs_exact_means_not_below_the_cases_dtype():
    tf32 = Arithmetic(inputs="tf32")
    assert violations(Requirements(), tf32, "tf32") == []  # a tf32 case may round its inputs to tf32
    [broken] = violations(Requirements(), tf32, "f32")
    assert broken.key == "inputs" and "tf32-rounded inputs" in broken.message and "requires f32" in broken.message
    assert violations(Requirements(), Arithmetic(inputs="bf16"), "bf16") == []
    assert keys(violations(Requirements(), Arithmetic(inputs="bf16"), "f16")) == ["inputs"]
    assert violations(Requirements(), Arithmetic(), "f32") == []


def test_inputs_named_format_and_any():
    assert violations(Requirements(inputs="tf32"), Arithmetic(inputs="tf32"), "f32") == []
    assert violations(Requirements(inputs="tf32"), Arithmetic(inputs="f16"), "f32") == []  # as many significand bits
    [broken] = violations(Requirements(inputs="tf32"), Arithmetic(inputs="bf16"), "f32")
    assert "bf16-rounded inputs" in broken.message and 'require.inputs = "tf32"' in broken.message
    assert violations(Requirements(inputs="any"), Arithmetic(inputs="bf16"), "f32") == []


def test_acc_f32_against_an_11_bit_accumulator_flat_or_per_tap():
    required = Requirements(acc="f32")
    [flat] = violations(required, Arithmetic(acc_bits=11), "f16")
    assert flat.key == "acc" and "pass through f16" in flat.message and 'require.acc = "f32"' in flat.message
    per_tap = Arithmetic(acc_bits=11, groups="taps", inner_bits=24)
    [tap] = violations(required, per_tap, "f16")
    assert "one partial per kernel tap" in tap.message and "f16" in tap.message
    assert violations(Requirements(acc="f16"), per_tap, "f16") == []
    assert keys(violations(Requirements(acc="f64"), Arithmetic(), "f32")) == ["acc"]
    assert violations(required, Arithmetic(), "f32") == [] and violations(Requirements(acc="any"), per_tap, "f16") == []
    assert violations(Requirements(), per_tap, "f16") == [tap]  # f32 is the default


def test_rounding_and_subnormals():
    nearest = Requirements(rounding="nearest")
    assert violations(nearest, Arithmetic(rounding="nearest-away"), "f32") == []
    for mode in ("toward-zero", "up", "down", "faithful"):
        [broken] = violations(nearest, Arithmetic(rounding=mode), "f32")
        assert broken.key == "rounding" and mode in broken.message
    assert violations(Requirements(), Arithmetic(rounding="toward-zero"), "f32") == []
    kept = Requirements(subnormals="kept")
    for inputs, outputs in (("flushed", "kept"), ("kept", "flushed"), ("flushed", "flushed")):
        [broken] = violations(kept, Arithmetic(subnormal_inputs=inputs, subnormal_outputs=outputs), "f16")
        assert broken.key == "subnormals" and f"inputs {inputs}, outputs {outputs}" in broken.message
    assert violations(kept, Arithmetic(), "f16") == []
    assert violations(Requirements(), Arithmetic(subnormal_outputs="flushed"), "f16") == []


arithmetics = st.builds(Arithmetic, inputs=st.sampled_from(INPUT_FORMATS), acc_bits=st.sampled_from([8, 11, 24, 53]),
                        rounding=st.sampled_from(ROUNDINGS), subnormal_inputs=st.sampled_from(["kept", "flushed"]),
                        subnormal_outputs=st.sampled_from(["kept", "flushed"]))
dtypes = st.sampled_from(["f32", "tf32", "f16", "bf16"])


@given(require_tables, arithmetics, dtypes)
def test_each_requirement_is_judged_on_its_own(table, arithmetic, dtype):
    required = Requirements.from_catalogue(table)
    found = keys(violations(required, arithmetic, dtype))
    assert len(found) == len(set(found))
    assert ("acc" in found) == (required.acc != "any" and arithmetic.acc_bits < FORMAT_BITS[required.acc])
    assert ("rounding" in found) == (required.rounding == "nearest" and not arithmetic.rounding.startswith("nearest"))
    assert ("subnormals" in found) == (required.subnormals == "kept" and arithmetic.flushes)
    if required.inputs == "any" or arithmetic.inputs == "exact":
        assert "inputs" not in found
    # Asking for nothing finds nothing; asking for one key finds at most that key.
    nothing = Requirements(inputs="any", acc="any", compute="any")
    assert violations(nothing, arithmetic, dtype) == []
    for key in Requirements.catalogue_keys():
        alone = Requirements.from_catalogue({**nothing.to_catalogue(), key: required.to_catalogue()[key]})
        assert keys(violations(alone, arithmetic, dtype)) == [k for k in found if k == key]


# -- judge with [[accept]] ----------------------------------------------------------------------
BROKEN = Arithmetic(inputs="bf16", acc_bits=11, rounding="toward-zero")
STRICT = Requirements(acc="f32", rounding="nearest")
CELL = "conv2d/bwd_data/f16/nchw/window"


def test_judge_accepts_by_device_impl_cells_and_requirement():
    cpu_acc = Acceptance(device="cpu", reason="per-tap f16 partials", requirements=("acc",), cells="conv2d/bwd_*/f16/*")
    failing, excused = judge(STRICT, [cpu_acc], BROKEN, "f16", "cpu", "torch", CELL)
    assert keys(failing) == ["inputs", "rounding"] and [(v.key, a) for v, a in excused] == [("acc", cpu_acc)]
    # another device, another cell, another impl: nothing is accepted
    assert judge(STRICT, [cpu_acc], BROKEN, "f16", "NVIDIA H100", "torch", CELL)[1] == []
    assert judge(STRICT, [cpu_acc], BROKEN, "f16", "cpu", "torch", "conv2d/fwd/f16/nchw/window")[1] == []
    only_mine = Acceptance(device="*", reason="mine", requirements=("inputs", "rounding", "acc"), impl="mykernels:*")
    assert judge(STRICT, [only_mine], BROKEN, "f16", "cpu", "torch", CELL)[1] == []
    failing, excused = judge(STRICT, [only_mine], BROKEN, "f16", "NVIDIA H100", "mykernels:conv", CELL)
    assert failing == [] and {v.key for v, _ in excused} == {"inputs", "acc", "rounding"}
    # the first entry that covers a violation is the one named
    failing, excused = judge(STRICT, [cpu_acc, only_mine], BROKEN, "f16", "cpu", "mykernels:conv", CELL)
    assert dict((v.key, a) for v, a in excused)["acc"] is cpu_acc


acceptances = st.builds(Acceptance, device=st.sampled_from(["cpu", "NVIDIA*", "*"]), reason=st.just("r"),
                        requirements=st.lists(st.sampled_from(Requirements.catalogue_keys()), min_size=1, unique=True).map(tuple),
                        impl=st.sampled_from(["*", "torch", "k:*"]), cells=st.sampled_from(["*", "gemm/*", "conv2d/*/f16/*"]))


@given(require_tables, arithmetics, dtypes, st.lists(acceptances, max_size=3), st.sampled_from(["cpu", "NVIDIA A100"]),
       st.sampled_from(["torch", "k:conv"]), st.sampled_from(["gemm/fwd/f32/nn", "conv2d/bwd_data/f16/nchw/window"]))
def test_judge_splits_the_violations_by_the_first_entry_that_covers_each(table, arithmetic, dtype, entries, device, impl, cell):
    required = Requirements.from_catalogue(table)
    failing, excused = judge(required, entries, arithmetic, dtype, device, impl, cell)
    found = violations(required, arithmetic, dtype)
    assert sorted(keys(failing) + [v.key for v, _ in excused]) == sorted(keys(found))
    for violation in failing:
        assert not any(a.covers(violation, device, impl, cell) for a in entries)
    for violation, entry in excused:
        assert entry == next(a for a in entries if a.covers(violation, device, impl, cell))


# -- end to end through execute -------------------------------------------------------------
E2E = """
seed = 3
[ranges]
r0 = [-1.0, 1.0]
[tolerances.f32]
rms = {rms}

[[suite]]
name = "mm"
op = "gemm"
dtypes = ["f32"]
layouts = ["nn"]
ranges = ["r0"]
impl = "arithmetic_kernels:{impl}"

[[suite.config]]
name = "m8"
m = 8
n = 8
k = 16
"""


def run_gemm(write_catalogue, impl: str, extra: str = "", rms: str = "1e-2"):
    from e2egen.generator.execute import execute

    path = write_catalogue(textwrap.dedent(E2E).format(impl=impl, rms=rms) + textwrap.dedent(extra))
    [case] = expand(load_catalogue(path))
    return execute(case, "cpu", str(path))


def test_bf16_inputs_break_the_default_requirement_and_an_accept_excuses_them(write_catalogue, fresh_profiles):
    failed = run_gemm(write_catalogue, "bf16_inputs")
    assert failed.status == "failed" and failed.verdict.passed  # the metrics pass; the arithmetic does not
    assert failed.reason.startswith("arithmetic: ") and "bf16-rounded inputs" in failed.reason
    lines = failed.report.splitlines()
    assert lines[0].startswith("arithmetic: products see bf16-rounded inputs") and "(probed now, cached in" in lines[0]
    assert lines[1].startswith("REQUIREMENT BROKEN: products see bf16-rounded inputs")
    assert failed.arithmetic.arithmetic.inputs == "bf16" and str(failed.arithmetic.cell).startswith("gemm/fwd/f32/nn")
    assert failed.arithmetic.device.device == "cpu" and failed.arithmetic.device.impl == "arithmetic_kernels:bf16_inputs"

    accept = """
    [[accept]]
    device = "cpu"
    impl = "arithmetic_kernels:*"
    cells = "gemm/*"
    require = ["inputs"]
    reason = "this kernel rounds its inputs to bf16 on purpose"
    """
    passed = run_gemm(write_catalogue, "bf16_inputs", accept)
    assert passed.status == "passed" and passed.reason == "", passed.report
    assert passed.report.splitlines()[0].startswith("arithmetic: products see bf16-rounded inputs")
    [line] = [line for line in passed.report.splitlines() if line.startswith("accepted deviation")]
    assert "bf16-rounded inputs" in line and "— this kernel rounds its inputs to bf16 on purpose ([[accept]] device=cpu impl=arithmetic_kernels:* cells=gemm/*)" in line
    assert "REQUIREMENT BROKEN" not in passed.report

    # An accept for another device excuses nothing; a metric failure comes after the arithmetic's.
    both = run_gemm(write_catalogue, "bf16_inputs", accept.replace('device = "cpu"', 'device = "NVIDIA*"'), rms="1e-9")
    assert both.status == "failed" and not both.verdict.passed
    [broken] = violations(Requirements(), both.arithmetic.arithmetic, "f32")
    assert both.reason == f"arithmetic: {broken.message}; {both.verdict.summary}"


def test_a_correct_kernel_passes_with_its_arithmetic_in_the_report(write_catalogue, fresh_profiles):
    outcome = run_gemm(write_catalogue, "correct", '[require]\nacc = "f32"\nrounding = "nearest"\nsubnormals = "kept"\n')
    assert outcome.status == "passed" and outcome.reason == "", outcome.report
    first = outcome.report.splitlines()[0]
    assert first.startswith("arithmetic: products see the inputs as given; accumulates in f32; rounds nearest-even (")
    assert "REQUIREMENT BROKEN" not in outcome.report and "accepted deviation" not in outcome.report
    assert outcome.arithmetic is not None and outcome.arithmetic.measured
    assert list(fresh_profiles.glob("*.toml"))  # probed into this test's own cache


def test_the_documented_example_accepts_a_plugin_kernels_per_tap_f16_partials_and_nothing_else():
    """The [[accept]] example of docs/concepts/requirements.md, judged against a plug-in kernel with torch's Zen 4 arithmetic: it excuses
    that kernel's f16 bwd_data cells on the CPU, not its bwd_weight, not torch's kernels, not another device."""
    import re

    from conftest import REPO

    page = (REPO / "docs" / "concepts" / "requirements.md").read_text(encoding="utf-8")
    example = re.search(r"```toml\n(# our kernel keeps one f16 partial.*?)```", page, re.S).group(1)
    per_tap = Arithmetic(acc_bits=11, groups="taps", inner_bits=24)
    excused = set()
    for case in cases_of(catalogue_text(TINY_CONV) + example):
        cell = f"{case.op}/{case.direction}/{case.dtype}/{case.layout}/window"
        failing, accepted = judge(case.require, case.accepted, per_tap, case.dtype, "cpu", "mykernels:conv", cell)
        excused |= {(case.direction, case.dtype) for _ in accepted}
        # 11-bit partial sums break the default f32 requirement in every cell the entry does not cover
        assert keys(failing) == ([] if (case.direction, case.dtype) == ("bwd_data", "f16") else ["acc"])
        for device, impl in (("NVIDIA H100", "mykernels:conv"), ("cpu", "torch")):
            elsewhere, _ = judge(case.require, case.accepted, per_tap, case.dtype, device, impl, cell)
            assert keys(elsewhere) == ["acc"]
    assert excused == {("bwd_data", "f16")}
