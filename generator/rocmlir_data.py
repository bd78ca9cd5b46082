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
- `-rand_side T`: only tensor T random, the others constant (1, or 0.1).
- Every input tensor is filled alike, a scaled gemm's scaleA and scaleB too
  (populateRandomTensorFillLogic draws f32 values and stores them with
  arith.truncf to the tensor's type; the fixed pattern is 1, -4, 0.5, 1.5 for
  f4E2M1FN and 1, 2, 4, 8, 0.5, 0.25, 0.125 for f8E8M0FNU, getTensorInitPattern).

Integer data makes many f32 conv/gemm results exact (products <= 25, sums far
below 2^24), which is what rocMLIR's f32 thresholds (relDiff 1e-6) assume.
The constant and fixed patterns, and -rand_side, have no e2egen equivalent:
such configs are imported with their seeded distribution and reported.
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
INT_DEFAULT = (-5, 5)  # randomIntegerValue(min, max) draws min..max - 1
FLOAT_DEFAULT = (0, 1)


@dataclass(frozen=True)
class DataRange:
    """An e2egen [ranges] entry: a name (part of case ids), bounds and how values are drawn."""

    name: str
    lo: int
    hi: int
    data: InputData  # "integers" (lo..hi) or "uniform" (reals in [lo, hi))

    @classmethod
    def of(cls, lo: int, hi: int, data: InputData) -> "DataRange":
        word = "int" if data == "integers" else "real"
        return cls(f"{word}{lo}to{hi}", lo, hi, data)

    def to_catalogue(self):
        return [self.lo, self.hi] if self.data == "uniform" else {"range": [self.lo, self.hi], "data": self.data}

    def describe(self) -> str:
        return (f"the integers {self.lo}..{self.hi}" if self.data == "integers"
                else f"real numbers in [{self.lo}, {self.hi}]")


Note = Callable[[object, str, bool], None]  # (flag or None, message, not_expressed)


def resolve_data(flags: Mapping[str, object], words: Iterable[str], note: Note, ones_as: str | None = None) -> DataRange:
    """The distribution rocmlir-gen draws from with these options (flags: name -> Flag with .value/.text).

    `note(flag, message, not_expressed)` reports what e2egen cannot draw the same way. `ones_as`: what the
    caller makes of `-rand none` (all ones) instead, said in the report (a scaled gemm's structured pattern).
    """
    rand = flags.get("rand")
    seeded = any(w in SEEDED_SUBSTITUTIONS for w in words)
    if rand is not None:
        seeded = bool(rand.value and re.fullmatch(r"[0-9]+", rand.value))
    kind_flag = flags.get("rand_type")
    kind = (kind_flag.value if kind_flag is not None else None) or "int"
    if kind not in ("int", "float"):
        note(kind_flag, f"{kind_flag.text}: rocmlir-gen knows int and float; read as int", True)
        kind = "int"
    names, default, last = ((("rand_min_int", "rand_max_int"), INT_DEFAULT, -1) if kind == "int"
                            else (("rand_min", "rand_max"), FLOAT_DEFAULT, 0))
    lo, hi = (_bound(flags, name, value, note) for name, value in zip(names, default))
    data_kind: InputData = "integers" if kind == "int" else "uniform"
    if hi + last <= lo:  # rocmlir-gen's min == max gives constant inputs
        fallback = DataRange.of(default[0], default[1] + last, data_kind)
        note(flags.get(names[1]) or flags.get(names[0]), f"-{names[0]} {lo} -{names[1]} {hi}: constant inputs, which "
                                                         f"e2egen does not draw; imported with {fallback.describe()}", True)
        lo, hi = default
    data = DataRange.of(lo, hi + last, data_kind)
    if not seeded and ones_as is not None and rand is not None and rand.value == "none":
        note(rand, f"inputs are all ones (rocmlir-gen's -rand none): {ones_as}", True)
    elif not seeded:
        pattern = ("all ones" if rand is not None and rand.value == "none"
                   else "the fixed pattern 0.5, -1, 0.75 (1, -1, 2 for integers; 1, -4, 0.5, 1.5 for fp4; powers of "
                        "two for E8M0 scales)")
        note(rand, f"inputs are {pattern} (rocmlir-gen's -rand {rand.value if rand else 'fixed'}), which e2egen does not "
                   f"draw; imported with {data.describe()}, rocMLIR's seeded data", True)
    side = flags.get("rand_side")
    if side is not None and side.value not in (None, "both"):
        note(side, f"{side.text}: rocMLIR fills only that tensor at random and the others with ones; e2egen draws every "
                   f"input from {data.describe()}", True)
    if "rand_type_int_for_inputs" in flags:
        note(flags["rand_type_int_for_inputs"], f"{flags['rand_type_int_for_inputs'].text}: integer data for some "
                                                "inputs only; e2egen draws every input from one range", True)
    return data


def _bound(flags: Mapping[str, object], name: str, default: int, note: Note) -> int:
    flag = flags.get(name)
    if flag is None:
        return default
    if flag.value is None or not re.fullmatch(r"-?[0-9]+", flag.value):
        note(flag, f"{flag.text}: rocmlir-gen takes an integer; {default} used", True)
        return default
    return int(flag.value)
