"""A kernel's arithmetic, measured: probes (probes.py) on crafted inputs (experiments.py), their findings
(model.py) kept as per-device profiles (profile.py) and looked up or probed per case (lookup.py)."""
from e2egen.runner.arithmetic.model import Arithmetic, CellKey, assumed_arithmetic, format_of_bits, with_accumulator

__all__ = ["Arithmetic", "CellKey", "assumed_arithmetic", "format_of_bits", "with_accumulator"]
