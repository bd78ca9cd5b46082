"""Every registered op, one checklist (docs/how-to/add-an-op.md): an op that joins the registry joins this test.

On the shipped catalogue's smallest PR case of each op:
- its float64 reference equals a brute-force evaluation written from the op's definition (tests/ops/brute_force.py);
- torch's own kernel passes its bound, and a planted bug (one output element 5 % off) fails it;
- where the op has probes, they find torch's kernel accumulating in at least f32, rounding to nearest, nothing unexplained;
- a catalogue table with an unknown key, or without a required one, is refused, naming the key.
"""
from __future__ import annotations

import functools

import pytest
import torch

from brute_force import brute_force
from e2egen import metrics
from e2egen.generator.cases import expand
from e2egen.generator.loader import load_catalogue
from e2egen.runner import ProblemError, make_problem, run
from e2egen.runner.arithmetic.lookup import not_probed, probe_problem
from e2egen.runner.inputs import generate_inputs, reference_inputs
from e2egen.runner.kernels import case_kernel
from e2egen.runner.ops import OPS
from e2egen.runner.options import BoundModel, ReferenceOptions
from e2egen.runner.reference import compute_reference
from small_cases import CATALOGUE

PLANTED_ERROR = 0.05  # relative: far beyond any correct kernel's error on these small cases


@functools.cache
def smallest_case_of_each_op() -> dict[str, object]:
    smallest: dict[str, object] = {}
    for case in expand(load_catalogue(str(CATALOGUE))):
        known = smallest.get(case.op)
        if known is None or preference(case) < preference(known):
            smallest[case.op] = case
    return smallest


def preference(case) -> tuple:
    """A plain float forward case first, then the smallest."""
    return (case.dtype not in ("f16", "bf16", "f32"), case.direction != "fwd", case.bytes_needed, case.id)


def case_of(op: str):
    case = smallest_case_of_each_op().get(op)
    assert case is not None, f"op {op} is registered but the shipped catalogue has no case of it"
    return case


@pytest.mark.parametrize("op", sorted(OPS))
def test_the_reference_is_the_ops_definition(op):
    problem = case_of(op).problem()
    drawn = generate_inputs(problem)
    inputs64 = reference_inputs(drawn, torch.device("cpu"))
    reference = compute_reference(problem, inputs64, ReferenceOptions())
    expected = brute_force(problem, inputs64)
    assert set(expected) <= set(reference.values)
    for name, value in expected.items():
        torch.testing.assert_close(reference.values[name], value, rtol=1e-12, atol=1e-12, msg=f"{op} {name}")


@pytest.mark.parametrize("op", sorted(OPS))
def test_torchs_kernel_passes_its_bound_and_a_planted_bug_fails_it(op):
    result = run(case_of(op).problem(), bound=BoundModel(), warm_kernel=False)
    for output in result.outputs.values():
        if output.compare_bound is None:
            continue
        correct = metrics.compare(output.ref, output.out, dtype=output.dtype, bound=output.compare_bound)
        assert correct.bound_ratio <= 1, f"{op} {output.name}: torch's own kernel at bound_ratio {correct.bound_ratio}"
        assert metrics.compare(output.ref, planted_bug(output.out), dtype=output.dtype,
                               bound=output.compare_bound).bound_ratio > 1, f"{op} {output.name}: a planted bug passed"


def planted_bug(out: torch.Tensor) -> torch.Tensor:
    """The output with its largest element PLANTED_ERROR off (1 where every element is 0)."""
    buggy = out.clone().contiguous()
    flat = buggy.view(-1)
    worst = flat.to(torch.float64).abs().argmax()
    value = flat[worst].to(torch.float64)
    flat[worst] = (value * (1 + PLANTED_ERROR) if value != 0 else torch.tensor(1.0, dtype=torch.float64)).to(out.dtype)
    return buggy


@functools.cache
def smallest_probed_case_of_each_op() -> dict[str, object]:
    """Per op with probes, its smallest case whose cell the runner probes (fp4 and integer cells it does not)."""
    smallest: dict[str, object] = {}
    for case in expand(load_catalogue(str(CATALOGUE))):
        problem = case.problem()
        if problem.spec.probe_params(problem.params, problem.direction) is None or not_probed(problem) is not None:
            continue
        known = smallest.get(case.op)
        if known is None or preference(case) < preference(known):
            smallest[case.op] = case
    return smallest


@pytest.mark.parametrize("op", sorted(smallest_probed_case_of_each_op()))
def test_the_probes_find_torchs_accumulation_in_at_least_f32(op):
    problem = smallest_probed_case_of_each_op()[op].problem()
    probed = probe_problem(problem)
    found = problem.numerics.probe_arithmetic(probed, case_kernel(problem), torch.device("cpu"), "torch")
    assert found.acc_bits >= 24 or not found.acc_bits_exact, found.describe()
    assert found.rounding in ("nearest-even", "faithful"), found.describe()
    assert not found.unexplained, found.describe()


@pytest.mark.parametrize("op", sorted(OPS))
def test_bad_params_are_refused_naming_the_key(op):
    case = case_of(op)
    params = dict(case.params)
    with pytest.raises(ProblemError, match="no_such_key"):
        make_problem(op, case.direction, case.dtype, case.layout, {**params, "no_such_key": 1}, (case.lo, case.hi), 1)
    for required in OPS[op].param_names:
        if required in params:
            without = {k: v for k, v in params.items() if k != required}
            with pytest.raises(ProblemError, match=required):
                make_problem(op, case.direction, case.dtype, case.layout, without, (case.lo, case.hi), 1)
            break
