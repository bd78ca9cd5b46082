"""Crafted product sums, run through the kernel under test.

An experiment is the list of products one output element sums: (r, a, b)
for reduction positions r of the documented order (runner/ops/product_sum/lowering.py) and
the two factors a (left operand) and b (right operand). Every other product
of that element is 0. The kernel runs on inputs that are zero except where
experiments put their factors, so one kernel call runs many experiments, one
per "slot": an output element whose input positions no other slot touches.

The slots come from the problem's index structure: lowering the problem with
each input replaced by its own flat indices gives, for every output element
and every r, which element of which input forms the product (or none, where
padding or a stride gap makes it 0).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from e2egen.runner.kernels import TORCH_IMPL, call_on_values
from e2egen.runner.ops.numerics import Kernel
from e2egen.runner.ops.product_sum.lowering import lower
from e2egen.runner.problem import Problem

MAX_CALLS = 64  # kernel calls one batch of experiments may take


@dataclass(frozen=True)
class Experiment:
    terms: tuple[tuple[int, float, float], ...]  # (r, a, b): the element's non-zero products
    tag: Any = None  # what the probe needs to read the result back

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(r for r, _, _ in self.terms)


class Slot:
    """An output element: which input elements form each of its products."""

    def __init__(self, logical: int, lhs: torch.Tensor, rhs: torch.Tensor):
        self.logical = logical  # flat index of the output element (logical shape)
        self.lhs = lhs.tolist()  # [R] flat index into the left input, -1 where no product exists
        self.rhs = rhs.tolist()  # [R] flat index into the right input, -1 likewise
        self.valid = frozenset(r for r, (a, b) in enumerate(zip(self.lhs, self.rhs)) if a >= 0 and b >= 0)
        self.lhs_used = frozenset(i for i in self.lhs if i >= 0)
        self.rhs_used = frozenset(i for i in self.rhs if i >= 0)

    def accepts(self, positions: Sequence[int]) -> bool:
        return self.valid.issuperset(positions)


class IndexStructure:
    """Which input elements form each product of each output element."""

    def __init__(self, problem: Problem):
        self.problem = problem
        shapes = problem.input_shapes
        names = list(shapes)
        if len(names) != 2:
            raise ValueError(f"probes need an op with two inputs; {problem.op} has {len(names)}")
        index = {name: torch.arange(1, 1 + math.prod(shape), dtype=torch.float64).reshape(shape) for name, shape in shapes.items()}
        zeros = {name: torch.zeros(shape, dtype=torch.float64) for name, shape in shapes.items()}
        first_is_lhs = bool(lower(problem, {names[0]: index[names[0]], names[1]: zeros[names[1]]}).lhs.any())
        self.lhs_name, self.rhs_name = (names[0], names[1]) if first_is_lhs else (names[1], names[0])
        form = lower(problem, index)
        self.lhs_index = form.lhs.to(torch.int64) - 1  # [G, M, R]
        self.rhs_index = form.rhs.to(torch.int64) - 1  # [G, R, Ncol]
        groups, rows, self.reduction = self.lhs_index.shape
        cols = self.rhs_index.shape[2]
        ids = torch.arange(groups * rows * cols, dtype=torch.float64).reshape(groups, rows, cols)
        lowered_of_logical = form.fold(ids).contiguous().reshape(-1).to(torch.int64)
        self.logical_of_lowered = torch.empty_like(lowered_of_logical)
        self.logical_of_lowered[lowered_of_logical] = torch.arange(len(lowered_of_logical))
        self.shape = (groups, rows, cols)
        self._slots: dict[int, Slot] = {}  # built once each: kernel calls draw from the same candidates

    def slot(self, g: int, m: int, n: int) -> Slot:
        _, rows, cols = self.shape
        flat = (g * rows + m) * cols + n
        found = self._slots.get(flat)
        if found is None:
            found = self._slots[flat] = Slot(int(self.logical_of_lowered[flat]), self.lhs_index[g, m], self.rhs_index[g, :, n])
        return found

    def widest_slot(self) -> Slot:
        """An output element with the most valid products (an interior one)."""
        valid = ((self.lhs_index >= 0).unsqueeze(-1) & (self.rhs_index >= 0).unsqueeze(1)).sum(2)  # [G, M, Ncol]
        g, m, n = divmod_all(int(valid.reshape(-1).argmax()), self.shape)
        return self.slot(g, m, n)

    def valid_positions(self) -> list[int]:
        """The reduction positions of the widest slot: where experiments may put products."""
        return sorted(self.widest_slot().valid)

    def candidate_slots(self, generator: torch.Generator, count: int) -> list[Slot]:
        groups, rows, cols = self.shape
        total = groups * rows * cols
        picks = torch.randperm(total, generator=generator)[:count].tolist()
        return [self.slot(*divmod_all(p, self.shape)) for p in picks]


def divmod_all(flat: int, shape: tuple[int, int, int]) -> tuple[int, int, int]:
    _, rows, cols = shape
    g, rest = divmod(flat, rows * cols)
    m, n = divmod(rest, cols)
    return g, m, n


def observe(problem: Problem, kernel: Kernel, device: torch.device, experiments: Sequence[Experiment],
            *, label: str = TORCH_IMPL, structure: IndexStructure | None = None, seed: int = 0) -> list[float | None]:
    """The kernel's output for each experiment (float64), None where no slot could hold it.

    Raises the runner's KernelFailure / Skip when the kernel fails on the probe's inputs.
    """
    structure = structure or IndexStructure(problem)
    generator = torch.Generator().manual_seed(seed)
    results: list[float | None] = [None] * len(experiments)
    pending = list(range(len(experiments)))
    candidates = max(256, 8 * len(experiments))
    for _ in range(MAX_CALLS):
        if not pending:
            break
        placed = _place(structure, [experiments[i] for i in pending], structure.candidate_slots(generator, candidates))
        if not placed:
            break
        lhs = torch.zeros(math.prod(problem.input_shapes[structure.lhs_name]), dtype=torch.float64)
        rhs = torch.zeros(math.prod(problem.input_shapes[structure.rhs_name]), dtype=torch.float64)
        for position, slot in placed:
            for r, a, b in experiments[pending[position]].terms:
                lhs[slot.lhs[r]] = a
                rhs[slot.rhs[r]] = b
        out = _run(problem, kernel, device, {structure.lhs_name: lhs, structure.rhs_name: rhs}, label)
        for position, slot in placed:
            results[pending[position]] = float(out[slot.logical])
        done = {position for position, _ in placed}
        pending = [index for position, index in enumerate(pending) if position not in done]
    return results


def _place(structure: IndexStructure, experiments: Sequence[Experiment], slots: Sequence[Slot]) -> list[tuple[int, Slot]]:
    """Greedy: each slot whose inputs no placed slot touches takes the first experiment it accepts."""
    used_lhs: set[int] = set()
    used_rhs: set[int] = set()
    waiting = list(range(len(experiments)))
    placed = []
    for slot in slots:
        if not waiting:
            break
        if not (slot.lhs_used.isdisjoint(used_lhs) and slot.rhs_used.isdisjoint(used_rhs)):
            continue
        choice = next((i for i in waiting if slot.accepts(experiments[i].positions)), None)
        if choice is None:
            continue
        used_lhs |= slot.lhs_used
        used_rhs |= slot.rhs_used
        placed.append((choice, slot))
        waiting.remove(choice)
    return placed


def _run(problem: Problem, kernel: Kernel, device: torch.device, flat: dict[str, torch.Tensor], label: str) -> torch.Tensor:
    values = {name: flat[name].reshape(shape) for name, shape in problem.input_shapes.items()}
    return call_on_values(problem, kernel, values, device, label=label)[problem.primary_output].contiguous().reshape(-1)
