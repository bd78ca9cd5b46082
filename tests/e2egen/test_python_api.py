"""e2egen.judge / e2egen.check: a kernel judged from Python gets the verdict a catalogue case gets."""
from __future__ import annotations

import importlib

import pytest
import torch

import e2egen
from e2egen import lent_kernels
from e2egen.generator.cases import expand
from e2egen.generator.errors import CatalogueError
from e2egen.generator.execute import execute
from e2egen.generator.loader import parse_catalogue
from e2egen.runner import KernelDeclined
from e2egen.runner.arithmetic import lookup


def _sibling(name):
    package = __name__.rpartition(".")[0].rpartition(".")[0]  # tests/ may or may not be a package
    return importlib.import_module(f"{package}.{name}" if package else name)


kernels = _sibling("kernels_for_tests")
SHAPE = {"m": 24, "n": 40, "k": 192}


def _off_by_a_permille(a, b):
    return (a.float() @ b.float() * 1.001).to(a.dtype)


def test_a_correct_kernel_passes_and_a_planted_error_fails():
    good = e2egen.judge(lambda a, b: a @ b, "gemm", SHAPE, "f16")
    assert good.passed, good.report
    assert good.verdict is not None and good.verdict.passed
    bad = e2egen.judge(_off_by_a_permille, "gemm", SHAPE, "f16")
    assert bad.status == "failed"
    assert "bound_ratio" in bad.reason


def test_the_reason_line_counts_the_probes_findings_and_the_report_lists_each():
    bad = e2egen.judge(_off_by_a_permille, "gemm", SHAPE, "f16")
    listed = [line for line in bad.report.splitlines() if line.startswith("REQUIREMENT BROKEN: the probes'")]
    assert len(listed) >= 2
    assert f"(a kernel bug; {len(listed)} findings in the report)" in bad.reason
    assert len(bad.reason) < 400 and "->" not in bad.reason  # no probe values in the one line


def test_the_verdict_is_the_catalogue_cases_verdict():
    """The same problem written as a catalogue: the same case, the same inputs, the same metrics."""
    catalogue = parse_catalogue(f"""
seed = 7
[ranges]
given = [-1.0, 1.0]
[[suite]]
name = "judge"
op = "gemm"
dtypes = ["bf16"]
layouts = ["nt"]
ranges = ["given"]
impl = "{kernels.__name__}:gemm"
[[suite.config]]
name = "given"
m = 24
n = 40
k = 192
""")
    (case,) = expand(catalogue)
    from_catalogue = execute(case, device="cpu")
    from_python = e2egen.judge(kernels.gemm, "gemm", SHAPE, "bf16", layout="nt", seed=7, device="cpu")
    assert from_python.case == case  # id, seed, tolerances, bound model, requirements: all of it
    assert from_python.status == from_catalogue.status == "passed"
    assert from_python.comparison == from_catalogue.comparison


def test_a_module_level_kernel_is_named_by_its_own_name_and_a_lambda_is_lent_for_the_call_only():
    named = e2egen.judge(kernels.gemm, "gemm", SHAPE, "f32")
    assert named.case.impl == f"{kernels.__name__}:gemm"
    lent = e2egen.judge(lambda a, b: a @ b, "gemm", SHAPE, "f32")
    assert lent.case.impl.startswith("e2egen.lent_kernels:")
    assert not [name for name, value in vars(lent_kernels).items() if callable(value)]  # returned after the call


def test_torch_own_kernel_by_none():
    outcome = e2egen.judge(None, "gemm", SHAPE, "bf16", layout="tn")
    assert outcome.passed and outcome.case.impl is None and outcome.case.layout == "tn"


def test_check_raises_with_the_report_and_the_call_that_reruns_it():
    with pytest.raises(AssertionError) as raised:
        e2egen.check(_off_by_a_permille, "gemm", SHAPE, "f16", seed=3)
    text = str(raised.value)
    assert "bound_ratio" in text and f"rerun: e2egen.judge('{__name__}:_off_by_a_permille', 'gemm'" in text
    assert "seed=3)" in text
    assert e2egen.check(kernels.gemm, "gemm", SHAPE, "f16").passed


def test_the_repro_reruns_the_same_case():
    first = e2egen.judge(_off_by_a_permille, "gemm", SHAPE, "bf16", layout="tt", seed=11)
    again = eval(first.repro, {"e2egen": e2egen, "_off_by_a_permille": _off_by_a_permille})
    assert again.case == first.case
    assert again.comparison == first.comparison


def test_tables_and_data_range_are_the_catalogue_tables():
    loose = e2egen.judge(_off_by_a_permille, "gemm", SHAPE, "f16", tolerances={"f16": {"max_rel_diff": 0.01}},
                         require={"f16": {"acc": "any"}}, data_range=(1.0, 2.0))
    assert "max_rel_diff" in loose.case.tolerances and loose.case.lo == 1.0 and loose.case.hi == 2.0
    integers = e2egen.judge(None, "gemm", SHAPE, "i8", data_range=(-5, 4), integer_data=True)
    assert integers.passed and integers.case.data == "integers"


def test_an_integer_output_is_exact_by_default_and_that_loosens_nothing():
    integers = e2egen.judge(None, "gemm", SHAPE, "i8", data_range=(-5, 4), integer_data=True)
    assert dict(integers.case.tolerances) == {"max_abs_diff": 0} and integers.case.bound is None
    assert integers.loosened == ()
    off_by_one = e2egen.judge(lambda a, b: torch.matmul(a.int(), b.int()) + 1, "gemm", SHAPE, "i8",
                              data_range=(-5, 4), integer_data=True)
    assert off_by_one.status == "failed" and "max_abs_diff" in off_by_one.reason
    # i8 attention writes f16: judged by the model's metrics, as any float output
    attention = e2egen.judge(None, "attention", {"seq_q": 16, "seq_k": 16, "head_dim_qk": 16, "quantized": True}, "i8",
                             data_range=(-5, 4), integer_data=True)
    assert "bound_ratio" in attention.case.tolerances and attention.case.bound is not None


def test_a_declined_case_is_skipped_not_failed():
    def only_f32(a, b):
        if a.dtype != torch.float32:
            raise KernelDeclined("no low-precision path")
        return a @ b

    outcome = e2egen.check(only_f32, "gemm", SHAPE, "f16")
    assert outcome.status == "skipped" and "no low-precision path" in outcome.reason


@pytest.mark.parametrize(("call", "argument", "named"), [
    (dict(dtype="f17"), "dtype", "'f17'"),
    (dict(layout="xx"), "layout", "'xx'"),
    (dict(shape={"m": 4, "n": 4, "kk": 4}), "shape['kk']", "'kk'"),
    (dict(shape={"m": 4, "n": 4, "k": -1}), "shape['k']", "-1"),
    (dict(shape=[4, 4, 4]), "shape", "list"),
    (dict(op="gemmm"), "op", "'gemmm'"),
    (dict(kernel=42), "kernel", "int"),
    (dict(direction="bwd_data"), "direction", "'bwd_data'"),
    (dict(tolerances={"f16": {"max_rel_eror": 0.1}}), "tolerances", "'max_rel_eror'"),
    (dict(data_range=(2.0, 1.0)), "data_range", "empty"),
])
def test_a_mistake_names_the_argument_and_the_bad_value(call, argument, named):
    arguments = {"kernel": None, "op": "gemm", "shape": SHAPE, "dtype": "f16", **call}
    with pytest.raises(CatalogueError) as raised:
        e2egen.judge(**arguments)
    (line,) = str(raised.value).splitlines()[:1]
    assert line.startswith(f"e2egen.judge(): {argument}"), line
    assert named in line


def _f16_running_sum(x, dim):
    """A correct-looking sum whose running total is kept in f16."""
    total = torch.zeros_like(x.select(dim[0], 0), dtype=torch.float16)
    for element in x.unbind(dim[0]):
        total = total + element.half()
    return total.to(x.dtype)


def test_a_lent_kernel_s_findings_are_its_own_and_never_cached(fresh_profiles, monkeypatch):
    """A lambda is lent under a name another call's kernel may carry later (another process counts from the
    same start): its findings neither come from the profile cache nor go to it."""
    shape = {"shape": [3, 64], "axis": 1}
    monkeypatch.setattr("e2egen.api._LENT_NAMES", iter(range(1, 100)))
    wide = e2egen.judge(lambda x, dim: x.double().sum(dim).to(x.dtype), "sum", shape, "f32")
    assert wide.arithmetic.arithmetic.acc_bits > 24
    assert "not cached: a kernel lent for one call" in wide.report
    assert not any("lent" in path.name for path in fresh_profiles.glob("*"))
    lookup.forget()  # as a new process starts
    monkeypatch.setattr("e2egen.api._LENT_NAMES", iter(range(1, 100)))  # the same lent name again
    narrow = e2egen.judge(lambda x, dim: _f16_running_sum(x, dim), "sum", shape, "f32")
    assert narrow.arithmetic.arithmetic.acc_bits == 11


def _exp_flushing_subnormals(x):
    y = torch.exp(x.float())
    return torch.where(y < torch.finfo(torch.float32).tiny, torch.zeros_like(y), y).to(x.dtype)


def test_a_kernel_that_flushes_subnormal_results_is_told_so():
    """JAX on a CPU flushes f32 subnormals: the reason names it first, where it said only bound_ratio 4.7e4."""
    tiny = {"shape": [32, 32]}
    flushed = e2egen.judge(_exp_flushing_subnormals, "exp", tiny, "f32", data_range=(-100.0, -80.0))
    assert flushed.status == "failed"
    assert flushed.reason.startswith("the kernel returned 0 where the exact result is subnormal in f32")
    assert "reference.ftz = true" in flushed.reason
    accepted = e2egen.judge(_exp_flushing_subnormals, "exp", tiny, "f32", data_range=(-100.0, -80.0),
                            reference={"ftz": True})
    assert "subnormal" not in (accepted.reason or "")
    assert e2egen.judge(None, "exp", tiny, "f32", data_range=(-100.0, -80.0)).passed
