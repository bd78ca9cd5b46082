"""Edge data: inputs chosen to reach what a catalogue's ranges may never reach.

A catalogue's ranges are its authors' choice, and some bugs sit where those ranges never go:
- an i8 kernel keeping its sums in i16 is exact on rocMLIR's -5..4 data and wraps over i8's whole range,
  and -128, whose negation is not an i8, is only drawn from a range that reaches it;
- an fp8 kernel that decodes e4m3fn through e4m3fnuz (whose largest value is 240) is right below 240;
- a scaled gemm that reads the next block's scale is right wherever every block's scale is the same, which
  uniform data gives.

So the generator gives each low-bit case of a suite (every config, direction, dtype and layout) one more case,
its range named EDGES_RANGE, whose data the op chooses (Op.edge_data; the default is format_edges below, a
scaled gemm's is pattern "varied"). The nightly sweep runs them with every other case; `make pr` runs one
only where the PR selection picked it. A suite whose own ranges already draw the same data gets none, and
`edges = false` (in a suite or at the top of the catalogue) or an exclude of range "edges" turns them off
(docs/reference/catalogue.md, "Edge data").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from e2egen.metrics.formats import get_format
from e2egen.runner.dtypes import FLOAT4, FLOAT8, FLOAT8_PAIRS, INTEGER_DTYPES, SATURATING_OUT_DTYPES, largest_finite

EDGES_RANGE = "edges"  # the range name of an edge-data case: a part of its id, reserved in a catalogue's [ranges]


@dataclass(frozen=True)
class EdgeData:
    """How an edges case draws its inputs: from [lo, hi] as `data` ("uniform" reals or the "integers" lo..hi), with
    `params` replacing the config's own where the op shapes its data through a parameter."""

    lo: float
    hi: float
    data: str
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


def format_edges(dtype: str, out_format: str, reduction_size: int) -> EdgeData | None:
    """A product-sum's edge data (Op.edge_data's default): i8's whole range as integers; an fp8 or fp4 format up
    to ± its largest finite value (a pair's smaller one), reals. None for the wide formats (a catalogue's ranges
    choose their edges: overflow, subnormals), and where the output cannot show the inputs' edges: an fp8 output
    saturates long before, and an output that cannot hold reduction_size products of the largest inputs would
    overflow instead."""
    largest = float(largest_finite(dtype))
    if dtype in INTEGER_DTYPES:
        edge = EdgeData(-largest - 1, largest, "integers")  # -largest - 1: the value whose negation wraps
    elif dtype in (*FLOAT8, *FLOAT8_PAIRS, *FLOAT4):
        edge = EdgeData(-largest, largest, "uniform")  # the top exponent codes
    else:
        return None
    if out_format in SATURATING_OUT_DTYPES:
        return None
    if reduction_size * largest * largest > get_format(out_format).max:
        return None
    return edge


__all__ = ["EDGES_RANGE", "EdgeData", "format_edges"]
