"""rocMLIR's input data, as an e2egen range (read from rocmlir-gen.cpp and conv-validation-wrappers.cpp).

rocmlir-gen fills every input with:
- `-rand N` (N a number; rocMLIR's CI passes it through the lit substitution
  %random_data, "-rand 1" in its random-data runs): with `-rand_type int`
  (the default) `randomIntegerValue(-5, 5)`, i.e. `rand() % 10 - 5`: the
  integers -5..4 (newer rocmlir-gen: -rand_min_int..-rand_max_int - 1); with
  `-rand_type float` `randomFloatValue(rand_min, rand_max)`: real numbers in
  [rand_min, rand_max] (integer flags, default 0 and 1).
- `-rand fixed` (the default without -rand): the repeating pattern 0.5, -1,
  0.75; `-rand none`: all ones (0.1 with -rand_type float).
- `-rand_side T`: only tensor T random, the others constant (min = max = 1: 1, or 0.1 with -rand_type
  float). T names a conv tensor by role: filter, input or output.
- Every input tensor is filled alike, a scaled gemm's scaleA and scaleB too
  (populateRandomTensorFillLogic draws f32 values and stores them with
  arith.truncf to the tensor's type; the fixed pattern is 1, -4, 0.5, 1.5 for
  f4E2M1FN and 1, 2, 4, 8, 0.5, 0.25, 0.125 for f8E8M0FNU, getTensorInitPattern).

Integer data makes many f32 conv/gemm results exact (products <= 25, sums far
below 2^24), which is what rocMLIR's f32 thresholds (relDiff 1e-6) assume.

Each becomes a [ranges] entry (runner/problem.py's data kinds): seeded data a range of integers or reals;
the fixed pattern data "pattern" and all ones data "ones" (their range only bounds the values); -rand_side a
seeded range whose `random` names the one input drawn (conv's filter w, input x, output dy).

The lit substitution %constrained_float_range_random_data is read as "-rand 1 -rand_type float -rand_min -1
-rand_max 1": rocMLIR's CMake value for it is not in the sources read, and GemmElementwiseGemmF16SplitK.toml,
the one catalogue that says, calls it "symmetric [-1, 1] random data". No catalogue says what
%constrained_range_random_data narrows: it is read as %random_data with the -rand flags given.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

if TYPE_CHECKING:
    from e2egen.runner.problem import InputData

# rocmlir-gen options that say how inputs are filled (all read here)
DATA_FLAGS = ("rand", "rand_type", "rand_min", "rand_max", "rand_min_int", "rand_max_int", "rand_side",
              "rand_type_int_for_inputs")
# lit substitutions that mean "-rand 1" in rocMLIR's random-data CI runs
SEEDED_SUBSTITUTIONS = ("%random_data", "%constrained_range_random_data", "%constrained_float_range_random_data")
# The -rand_type, -rand_min and -rand_max a substitution stands for, read from the catalogues' own comments
# (module docstring); flags given on the command line still override them.
SUBSTITUTION_DATA = {"%constrained_float_range_random_data": {"rand_type": "float", "rand_min": "-1", "rand_max": "1"}}
INT_DEFAULT = (-5, 5)  # randomIntegerValue(min, max) draws min..max - 1
FLOAT_DEFAULT = (0, 1)
# The range of "pattern" data: it holds every fixed pattern of an element format (floats -1..0.75, integers
# -1..2, fp4 -4..1.5), which runner.check_input_data asks of it.
PATTERN_RANGE = (-4, 2)
ONES_RANGE = (0, 1)
# -rand_side's tensor roles -> e2egen's conv inputs (which of them a direction takes: runner/ops/product_sum/conv.py)
CONV_SIDES = {"filter": "w", "input": "x", "output": "dy"}
CONV_OPS = ("conv1d", "conv2d", "conv3d")


@dataclass(frozen=True)
class DataRange:
    """An e2egen [ranges] entry: a name (part of case ids), bounds, how values are drawn and, where only some
    inputs are random, which."""

    name: str
    lo: int
    hi: int
    data: InputData  # "integers" (lo..hi), "uniform" (reals in [lo, hi]), "pattern" or "ones"
    random: tuple[str, ...] = ()

    @classmethod
    def of(cls, lo: int, hi: int, data: InputData, random: tuple[str, ...] = ()) -> "DataRange":
        name = (data if data in ("pattern", "ones") else f"{'int' if data == 'integers' else 'real'}{lo}to{hi}")
        return cls(name + "".join(f"-random-{input_name}" for input_name in random), lo, hi, data, random)

    @property
    def input_data(self) -> str:
        """The data as a case carries it (runner's join_input_data)."""
        from e2egen.runner.problem import join_input_data

        return join_input_data(self.data, self.random)

    def to_catalogue(self):
        if self.data == "uniform" and not self.random:
            return [self.lo, self.hi]
        return {"range": [self.lo, self.hi], "data": self.data, **({"random": list(self.random)} if self.random else {})}

    def describe(self) -> str:
        values = {"integers": f"the integers {self.lo}..{self.hi}", "uniform": f"real numbers in [{self.lo}, {self.hi}]",
                  "pattern": "rocmlir-gen's fixed pattern", "ones": "all ones"}[self.data]
        return values + (f" for {', '.join(self.random)}, the other inputs constant" if self.random else "")


Note = Callable[[object, str, bool], None]  # (flag or None, message, not_expressed)


def resolve_data(flags: Mapping[str, object], words: Iterable[str], note: Note, ones_as: str | None = None,
                 op: str | None = None) -> DataRange:
    """The data rocmlir-gen fills the inputs of `op` with under these options (flags: name -> Flag with
    .value/.text).

    `note(flag, message, not_expressed)` reports what e2egen cannot fill the same way. `ones_as`: what the
    caller makes of `-rand none` (all ones) instead, said in the report (a scaled gemm's structured pattern).
    """
    words = tuple(words)
    rand = flags.get("rand")
    seeded = any(w in SEEDED_SUBSTITUTIONS for w in words)
    if rand is not None:
        seeded = bool(rand.value and re.fullmatch(r"[0-9]+", rand.value))
    given = {name: value for w in words for name, value in SUBSTITUTION_DATA.get(w, {}).items()}
    kind_flag = flags.get("rand_type")
    kind = (kind_flag.value if kind_flag is not None else given.get("rand_type")) or "int"
    if kind not in ("int", "float"):
        note(kind_flag, f"{kind_flag.text}: rocmlir-gen knows int and float; read as int", True)
        kind = "int"
    names, default, last = ((("rand_min_int", "rand_max_int"), INT_DEFAULT, -1) if kind == "int"
                            else (("rand_min", "rand_max"), FLOAT_DEFAULT, 0))
    default = tuple(int(given.get(name, value)) for name, value in zip(names, default))
    lo, hi = (_bound(flags, name, value, note) for name, value in zip(names, default))
    data_kind: InputData = "integers" if kind == "int" else "uniform"
    if hi + last <= lo:  # rocmlir-gen's min == max gives constant inputs
        fallback = DataRange.of(default[0], default[1] + last, data_kind)
        note(flags.get(names[1]) or flags.get(names[0]), f"-{names[0]} {lo} -{names[1]} {hi}: constant inputs, which "
                                                         f"e2egen does not draw; imported with {fallback.describe()}", True)
        lo, hi = default
    side = flags.get("rand_side")
    one_side = side is not None and side.value not in (None, "both")
    if "rand_type_int_for_inputs" in flags:
        note(flags["rand_type_int_for_inputs"], f"{flags['rand_type_int_for_inputs'].text}: integer data for some "
                                                "inputs only; e2egen draws every input from one range", True)
    if not seeded:
        if one_side:
            note(side, f"{side.text} beside rocmlir-gen's -rand {rand.value if rand else 'fixed'}: not read here (it "
                       "chooses which tensor is random)", True)
        if rand is not None and rand.value == "none":
            if ones_as is not None:
                note(rand, f"inputs are all ones (rocmlir-gen's -rand none): {ones_as}", True)
                return DataRange.of(lo, hi + last, data_kind)
            if kind == "float":
                note(rand, "-rand none with -rand_type float: rocmlir-gen's inputs are all 0.1, which e2egen does not "
                           "fill; imported as all ones", True)
            return DataRange.of(*ONES_RANGE, "ones")
        return DataRange.of(*PATTERN_RANGE, "pattern")
    random = ()
    if one_side:
        if op in CONV_OPS and side.value in CONV_SIDES:
            random = (CONV_SIDES[side.value],)
        else:
            note(side, f"{side.text}: rocMLIR fills only that tensor at random and the others with ones; e2egen knows "
                       f"it for {', '.join(CONV_OPS)} ({', '.join(CONV_SIDES)}) and draws every input here", True)
    return DataRange.of(lo, hi + last, data_kind, random)


def _bound(flags: Mapping[str, object], name: str, default: int, note: Note) -> int:
    flag = flags.get(name)
    if flag is None:
        return default
    if flag.value is None or not re.fullmatch(r"-?[0-9]+", flag.value):
        note(flag, f"{flag.text}: rocmlir-gen takes an integer; {default} used", True)
        return default
    return int(flag.value)
