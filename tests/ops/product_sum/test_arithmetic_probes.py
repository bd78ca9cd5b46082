"""The arithmetic probes (runner/arithmetic) tell how a kernel computes, and flag wrong kernels.

Evidence, with kernels whose arithmetic is known exactly:

* every emulated kernel of tests/arithmetic_kernels.py (inputs rounded to
  bf16 / tf32 / f16, accumulators of f16 / bf16 / f64, chunks, per-tap and
  per-sample partials, truncation, flushed subnormals) is identified exactly,
  on gemm and on conv1d/2d/3d in every direction;
* every WRONG kernel of e2egen.runner.ops.product_sum.kernels gets findings that fail
  `require.acc = "f32"` (an unexplained outcome, i.e. a bug, or a narrow
  accumulator), and every CORRECT one a clean f32 profile;
* profiles survive the TOML round trip and concurrent writers, and
  `measured_arithmetic` probes a cell once, then reads it from the cache
  (never caching findings that name a bug).

Speed: the emulated kernels sum one product at a time in float64 with many
small torch ops, so this module runs torch on one intra-op thread (two xdist
workers on two cores with two threads each made those small ops ~1000x
slower). conv3d's probe problem (16 channels on 5x5x5) costs those kernels
~8 s a direction: the default matrix probes conv3d on 4 channels on 4x4x4
(same window, seed and probes); a `slow` test probes the real conv3d probe
problem for a representative subset of kernels.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import pytest
import torch

from e2egen.runner import make_problem
from e2egen.runner.arithmetic import lookup
from e2egen.runner.arithmetic.lookup import cell_of, device_key, measured_arithmetic, probe_problem
from e2egen.runner.arithmetic.model import Arithmetic, CellKey
from e2egen.runner.ops.product_sum.probes import probe_arithmetic
from e2egen.runner.ops.product_sum import kernels as wrong_kernels
from e2egen.runner.arithmetic.profile import DeviceKey, Profile, read_profile, record_in_cache
from e2egen.runner.arithmetic.requirements import violations
from e2egen.runner.errors import KernelFailure
from e2egen.runner.kernels import resolve_impl
from e2egen.runner.options import Requirements

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths

CPU = torch.device("cpu")
F32_ACC = Requirements(acc="f32")


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# -- problems ---------------------------------------------------------------------------------
SPATIAL = {"conv1d": {"w": 12}, "conv2d": {"hw": [6, 5]}, "conv3d": {"dhw": [4, 4, 3]}}
CELLS = (("gemm", "fwd"),
         *((op, direction) for op in ("conv1d", "conv2d", "conv3d") for direction in ("fwd", "bwd_data", "bwd_weight")))


def build(op: str, direction: str, dtype: str, layout: str) -> object:
    """A case's problem; the probes run on its cell's probe problem (lookup.probe_problem)."""
    if op == "gemm":
        params = {"m": 8, "n": 12, "k": 40}
    else:
        params = {"n": 2, "c": 8, "k": 12, "kernel": 3, "pad": 1, **SPATIAL[op]}
    return make_problem(op, direction, dtype, layout, params, (-1.0, 1.0), 3)


def probe_target(problem, full_size: bool = False):
    """The cell's probe problem; conv3d's shrunk to 4 channels on 4x4x4 unless full_size (see the docstring)."""
    probe = probe_problem(problem)
    if problem.op == "conv3d" and not full_size:
        probe = replace(probe, params=replace(probe.params, c=4, k=4, size=(4, 4, 4)))
    return probe


def probe(impl: str, op: str, direction: str, dtype: str, layout: str, full_size: bool = False) -> Arithmetic:
    problem = build(op, direction, dtype, layout)
    return probe_arithmetic(probe_target(problem, full_size), resolve_impl(op, direction, impl), CPU, impl)


@lru_cache(maxsize=None)
def probed(impl: str, op: str, direction: str, dtype: str, layout: str) -> Arithmetic:
    return probe(impl, op, direction, dtype, layout)


# -- what each emulated kernel must be found to do ----------------------------------------------
@dataclass(frozen=True)
class Expect:
    inputs: str = "exact"
    acc_bits: int = 24  # 53: the f64 accumulator (at least 25 bits, or beyond the probe's range)
    groups: str = "none"
    group_size: int = 0
    rounding: str = "nearest-even"
    subnormals: str = "kept"


F16_ACC = Expect(acc_bits=11)
KERNELS: dict[str, tuple[Expect, tuple[str, ...]]] = {  # name: (findings, dtypes where they are meaningful)
    "correct": (Expect(), ("f32", "bf16")),
    "correct_reversed": (Expect(), ("f32", "bf16")),
    "correct_chunked": (Expect(), ("f32", "bf16")),
    "correct_f64": (Expect(acc_bits=53), ("f32", "bf16")),
    "bf16_inputs": (Expect(inputs="bf16"), ("f32",)),
    "tf32_inputs": (Expect(inputs="tf32"), ("f32",)),
    "f16_inputs": (Expect(inputs="f16"), ("f32",)),
    "f16_acc": (F16_ACC, ("f16",)),
    "bf16_acc": (Expect(acc_bits=8), ("bf16", "f32")),
    "f16_chunks": (replace(F16_ACC, groups="chunks", group_size=32), ("f16",)),
    "f16_per_tap": (replace(F16_ACC, groups="taps"), ("f16",)),
    "f16_per_sample": (replace(F16_ACC, groups="samples"), ("f16",)),
    "toward_zero": (Expect(rounding="toward-zero"), ("f32", "f16")),
    "flush_subnormals": (Expect(subnormals="flushed"), ("f32", "f16")),
}


def not_applicable(name: str, op: str, direction: str) -> str | None:
    """Why an emulated kernel has no such arithmetic on this cell (it raises ValueError there by design)."""
    if name == "f16_per_tap" and (op == "gemm" or direction == "bwd_weight"):
        return "per-tap partials exist on conv fwd / bwd_data only (the kernel raises ValueError elsewhere)"
    if name == "f16_per_sample" and (op == "gemm" or direction != "bwd_weight"):
        return "per-sample partials exist on conv bwd_weight only (the kernel raises ValueError elsewhere)"
    return None


def identification_cases():
    conv_layouts, gemm_layouts = itertools.cycle(("nchw", "nhwc")), itertools.cycle(("nn", "tn"))
    cases = []
    for name, (_, dtypes) in KERNELS.items():
        for dtype in dtypes:
            for op, direction in CELLS:
                layout = next(gemm_layouts if op == "gemm" else conv_layouts)
                marks = [getattr(pytest.mark, op)]
                reason = not_applicable(name, op, direction)
                if reason:
                    marks.append(pytest.mark.skip(reason=reason))
                cases.append(pytest.param(name, op, direction, dtype, layout, marks=marks,
                                          id=f"{name}-{op}-{direction}-{dtype}-{layout}"))
    # The probes cannot see this one: with f16 data an 8-bit accumulator rounds single products like bf16 inputs
    # would, and products of two 8-bit values (16 bits) do not fit the 11-bit output that would tell them apart
    # (probes._products_exact); the finding (bf16 inputs, 8-bit accumulator) is the conservative one.
    cases.append(pytest.param("bf16_acc", "conv2d", "fwd", "f16", "nchw", id="bf16_acc-conv2d-fwd-f16-nchw",
                              marks=pytest.mark.skip(reason="bf16 accumulation of f16 data reads as bf16 inputs: "
                                                            "the f16 output cannot show the difference")))
    return cases


def check_identified(found: Arithmetic, name: str, dtype: str) -> None:
    expect = KERNELS[name][0]
    seen = {"inputs": found.inputs, "inputs_rounding": found.inputs_rounding, "groups": found.groups,
            "group_size": found.group_size, "rounding": found.rounding, "subnormal_inputs": found.subnormal_inputs,
            "subnormal_outputs": found.subnormal_outputs, "special_values": found.special_values,
            "unexplained": found.unexplained}
    wanted = {"inputs": expect.inputs, "inputs_rounding": "nearest", "groups": expect.groups,
              "group_size": expect.group_size, "rounding": expect.rounding, "subnormal_inputs": expect.subnormals,
              "subnormal_outputs": expect.subnormals, "special_values": "ieee", "unexplained": ()}
    assert seen == wanted, found.describe()
    if expect.acc_bits == 53:
        assert found.acc_bits >= 25 or not found.acc_bits_exact, found.describe()
    else:
        assert (found.acc_bits, found.acc_bits_exact) == (expect.acc_bits, True), found.describe()
    if expect.groups == "none":
        assert found.inner_bits == 0
    else:
        # The emulated kernels sum a group's products exactly (a float64 bmm) and round the partial to f32 once,
        # so no loss inside a group shows: at least f32's 24 bits (the widest gap the probe could try, plus one).
        assert found.inner_bits >= 24, found.describe()
    if dtype != "f32" or name != "bf16_acc":
        assert found.notes == (), found.notes


@pytest.mark.parametrize("name, op, direction, dtype, layout", identification_cases())
def test_probes_identify_emulated_kernel(name, op, direction, dtype, layout):
    found = probe(f"arithmetic_kernels:{name}", op, direction, dtype, layout)
    check_identified(found, name, dtype)


def test_bf16_accumulator_on_f32_data_is_told_from_bf16_inputs():
    """Single products come back rounded to 8 bits either way; exact products of two 8-bit values say which."""
    found = probed("arithmetic_kernels:bf16_acc", "conv1d", "fwd", "f32", "nchw")
    assert (found.inputs, found.acc_bits) == ("exact", 8)
    assert any("accumulator" in note for note in found.notes), found.notes
    assert probed("arithmetic_kernels:bf16_inputs", "conv1d", "fwd", "f32", "nchw").acc_bits == 24


def test_f16_inputs_are_told_from_tf32_inputs():
    """Both keep 11 significand bits; only f16's range (65504 at most) tells them apart."""
    f16 = probed("arithmetic_kernels:f16_inputs", "gemm", "fwd", "f32", "nn")
    tf32 = probed("arithmetic_kernels:tf32_inputs", "gemm", "fwd", "f32", "nn")
    assert (f16.inputs, tf32.inputs) == ("f16", "tf32")
    # the later probes keep their factors in f16's range: no false rounding, flush or bug findings
    assert f16.differences(tf32) == ["inputs 'f16' -> 'tf32'"]


def test_kernel_that_cannot_run_the_probe_problem_raises_kernel_failure():
    with pytest.raises(KernelFailure, match="taps"):
        probe("arithmetic_kernels:f16_per_tap", "conv1d", "bwd_weight", "f16", "nchw")


SLOW_CONV3D = [("correct", "f32"), ("f16_inputs", "f32"), ("f16_chunks", "f16"), ("f16_per_tap", "f16"),
               ("f16_per_sample", "f16"), ("toward_zero", "f16"), ("flush_subnormals", "f16")]


@pytest.mark.slow
@pytest.mark.conv3d
@pytest.mark.parametrize("direction", ("fwd", "bwd_data", "bwd_weight"))
@pytest.mark.parametrize("name, dtype", SLOW_CONV3D)
def test_probes_identify_emulated_kernel_on_the_conv3d_probe_problem(name, dtype, direction):
    reason = not_applicable(name, "conv3d", direction)
    if reason:
        pytest.skip(reason)
    layout = "nhwc" if direction == "bwd_data" else "nchw"
    found = probe(f"arithmetic_kernels:{name}", "conv3d", direction, dtype, layout, full_size=True)
    assert "c=16 k=16 dhw=5x5x5" in found.probed_with
    check_identified(found, name, dtype)


# -- the study's kernels: correct ones pass require.acc = "f32", wrong ones never do ------------------
STUDY_CELLS = (("gemm", "fwd", "tn"), ("conv2d", "fwd", "nhwc"), ("conv2d", "bwd_data", "nchw"),
               ("conv2d", "bwd_weight", "nhwc"))
# Bugs of indexing or scaling: outcomes no arithmetic explains. acc_lowp's bug is its accumulator.
INDEX_BUGS = ("drop_last", "scale_3ulp", "shift_window", "swap_channels")
NOT_SEEN_BY_PROBES = {
    "one_element": "one wrong output element: the probes read a few crafted elements, not every one (the comparison "
                   "with the reference catches it: test_bound_kernels.py)",
}


def study_cases(kernels):
    for name in kernels:
        for dtype in ("f32", "f16"):
            for op, direction, layout in STUDY_CELLS:
                if name in wrong_kernels.CONV_ONLY and op == "gemm":
                    continue
                marks = [pytest.mark.skip(reason=NOT_SEEN_BY_PROBES[name])] if name in NOT_SEEN_BY_PROBES else []
                yield pytest.param(name, op, direction, dtype, layout, marks=marks,
                                   id=f"{name}-{op}-{direction}-{dtype}-{layout}")


def test_study_kernel_lists_are_covered():
    assert set(wrong_kernels.WRONG) == {"acc_lowp", *INDEX_BUGS, *NOT_SEEN_BY_PROBES}


@pytest.mark.parametrize("name, op, direction, dtype, layout", list(study_cases(wrong_kernels.CORRECT)))
def test_correct_study_kernel_gets_a_clean_f32_profile(name, op, direction, dtype, layout):
    found = probe(f"e2egen.runner.ops.product_sum.kernels:{name}", op, direction, dtype, layout)
    assert violations(F32_ACC, found, dtype) == [], found.describe()
    assert (found.inputs, found.acc_bits, found.groups, found.rounding, found.flushes, found.special_values) == \
        ("exact", 24, "none", "nearest-even", False, "ieee"), found.describe()


@pytest.mark.parametrize("name, op, direction, dtype, layout", list(study_cases(wrong_kernels.WRONG)))
def test_wrong_study_kernel_never_gets_a_clean_f32_profile(name, op, direction, dtype, layout):
    found = probe(f"e2egen.runner.ops.product_sum.kernels:{name}", op, direction, dtype, layout)
    broken = violations(F32_ACC, found, dtype)
    assert found.unexplained or broken, found.describe()
    if name in INDEX_BUGS:
        assert found.unexplained, f"{name}: a bug, not rounding, yet: {found.describe()}"
        assert "exact" in {v.key for v in broken}
    else:  # acc_lowp: a half-precision running sum, which is arithmetic, not a bug
        assert found.unexplained == ()
        assert [v.key for v in broken] == ["acc"]
        assert found.acc_bits == (11 if dtype == "f16" else 8)


# -- profiles ----------------------------------------------------------------------------------------
ROUND_TRIP = [("arithmetic_kernels:correct_f64", "f32"), ("arithmetic_kernels:f16_inputs", "f32"),
              ("arithmetic_kernels:bf16_acc", "f32"), ("arithmetic_kernels:f16_chunks", "f16"),
              ("arithmetic_kernels:f16_per_tap", "f16"), ("arithmetic_kernels:toward_zero", "f16"),
              ("arithmetic_kernels:flush_subnormals", "f32"), ("e2egen.runner.ops.product_sum.kernels:drop_last", "f32")]


def test_profile_toml_round_trip_keeps_every_finding(tmp_path):
    cells = {}
    for impl, dtype in ROUND_TRIP:
        findings = probed(impl, "conv1d", "fwd", dtype, "nchw")
        cells[f"conv1d/fwd/{dtype}/nchw/{impl.rpartition(':')[2]}"] = findings
    assert {a.groups for a in cells.values()} >= {"none", "chunks", "taps"}
    assert any(a.notes for a in cells.values()) and any(a.unexplained for a in cells.values())
    key = DeviceKey.of("cpu", "arithmetic_kernels:several", {"torch": "2.x", "impl_source": "0123abcd"})
    profile = Profile(key, cells)
    text = profile.to_toml()
    back = Profile.from_toml(text)
    kept = {name: a for name, a in cells.items() if not a.unexplained}  # a kernel bug's findings: refused on reading
    assert back.key == key
    assert back.cells == kept and {name for name, _ in back.rejected} == set(cells) - set(kept)
    assert Profile(key, kept).to_toml() == Profile.from_toml(Profile(key, kept).to_toml()).to_toml()
    written = profile.write(tmp_path / key.file_name)
    again = read_profile(written)
    assert (again.key, again.cells, again.path) == (key, kept, written)


def test_concurrent_writers_keep_every_cell(tmp_path, monkeypatch):
    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path))
    key = DeviceKey.of("cpu", "arithmetic_kernels:threads", {"torch": "2.x"})
    writers, cells_each = 8, 5
    start = threading.Barrier(writers)
    failures = []

    def write(worker: int) -> None:
        try:
            start.wait()
            for index in range(cells_each):
                cell = CellKey("conv2d", "fwd", "f32", "nchw", f"w{worker}c{index}")
                record_in_cache(key, cell, Arithmetic(acc_bits=10 + index, probed_with=f"writer {worker}"))
        except Exception as err:  # noqa: BLE001 - reported below
            failures.append(err)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    profile = read_profile(tmp_path / key.cache_file_name)
    assert len(profile.cells) == writers * cells_each
    for worker, index in itertools.product(range(writers), range(cells_each)):
        found = profile.cells[f"conv2d/fwd/f32/nchw/w{worker}c{index}"]
        assert (found.acc_bits, found.probed_with) == (10 + index, f"writer {worker}")
    # no temporary file left behind (the writers' lock file stays, empty, for the next writer)
    assert sorted(p.name for p in tmp_path.iterdir()) == [key.cache_file_name, key.cache_file_name + ".lock"]


# -- measured_arithmetic: probe once, then the cache ---------------------------------------------------
@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path))
    lookup.forget()
    yield tmp_path
    lookup.forget()


def measure(impl: str, op="conv1d", direction="fwd", dtype="f32", layout="nchw"):
    problem = build(op, direction, dtype, layout)
    return measured_arithmetic(problem, resolve_impl(op, direction, impl), CPU, impl)


def test_measured_arithmetic_probes_once_then_reads_the_cache(fresh_cache, monkeypatch):
    impl = "arithmetic_kernels:toward_zero"
    first = measure(impl)
    path = fresh_cache / device_key(CPU, impl).cache_file_name
    assert first.probed_now and first.measured
    assert first.origin == f"probed now, cached in {path}"
    assert first.arithmetic.rounding == "toward-zero"
    assert path.is_file()
    assert read_profile(path).get(first.cell) == first.arithmetic
    assert measure(impl) is first  # this process remembers it

    lookup.forget()  # as a new process would: nothing remembered, the probes must not run again

    def no_probing(*args, **kwargs):
        raise AssertionError("probed again instead of reading the cached profile")

    monkeypatch.setattr(lookup, "probe_cell", no_probing)
    second = measure(impl)
    assert not second.probed_now
    assert second.origin == f"cached profile {path.name}"
    assert second.arithmetic == first.arithmetic
    assert second.cell == first.cell == cell_of(build("conv1d", "fwd", "f32", "nchw"))


def test_measured_arithmetic_never_caches_a_bug(fresh_cache):
    impl = "e2egen.runner.ops.product_sum.kernels:drop_last"
    first = measure(impl)
    assert first.probed_now and first.arithmetic.unexplained
    assert "not cached" in first.origin
    assert not (fresh_cache / device_key(CPU, impl).cache_file_name).exists()
    lookup.forget()
    again = measure(impl)
    assert again.probed_now and again.arithmetic.unexplained  # probed afresh (a fixed kernel would be seen)


def test_measured_arithmetic_assumes_the_dtype_where_the_probes_cannot_run(fresh_cache):
    impl = "arithmetic_kernels:f16_per_tap"
    found = measure(impl, op="gemm", dtype="f16", layout="nn")
    assert not found.measured and not found.probed_now
    assert found.origin.startswith("assumed (the probes could not run")
    assert (found.arithmetic.acc_bits, found.arithmetic.inputs) == (24, "exact")
    assert list(Path(fresh_cache).iterdir()) == []
