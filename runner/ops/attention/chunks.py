"""Attention's reference and bound over chunks of query rows, and where K and V are long over blocks of keys
(key_blocks.py), so that their memory grows with neither seq_q·seq_k nor seq_k.

Every output row depends on its own query row and every key: the float64 scores, weights and probabilities
of a chunk of rows are all its reference and its bound need. A case whose (batch, heads_q, seq_q, seq_k)
scores hold more than params.CHUNK_SCORES elements is computed chunk by chunk (params.query_chunks): each
chunk's reference rows and bound are built from its one AttentionRows, as an unchunked case's share theirs,
and its score-sized temporaries are freed, their pages given back, before the next chunk's. The rows are the
same computation on fewer rows: the reference is the whole case's to the last bit, the bound the same terms,
whose magnitude sums a product of fewer rows may take in f32 (proven and widened) where the whole case's took
float64: within 1e-5 relative (tests/ops/attention/test_attention_chunks.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from e2egen.runner.bound import BoundModel, ErrorBound
from e2egen.runner.host_memory import release_free_pages
from e2egen.runner.ops.attention.attention_math import QueryRows, attention_rows, query_slice
from e2egen.runner.ops.attention.bound import rows_bound
from e2egen.runner.ops.attention.key_blocks import StreamedRows, streamed_rows
from e2egen.runner.ops.attention.params import blocks_keys, query_chunks
from e2egen.runner.ops.shared_values import computed_once
from e2egen.runner.problem import Problem

QUERY_DIM = {"o": -2, "lse": -1}  # where each output keeps its query rows


@dataclass(frozen=True, eq=False)
class QueryChunked:
    """A bound made of its chunks' bounds: each evaluated on its rows of the reference, then joined."""

    chunks: tuple[tuple[QueryRows, ErrorBound], ...]
    query_dim: int

    def evaluate(self, model: BoundModel, ref: torch.Tensor) -> torch.Tensor:
        return torch.cat([bound.evaluate(model, ref.narrow(self.query_dim, start, stop - start))
                          for (start, stop), bound in self.chunks], dim=self.query_dim)


@dataclass(frozen=True, eq=False)
class ChunkedAttention:
    reference: dict[str, torch.Tensor]
    bounds: dict[str, QueryChunked]


def chunked_attention(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> ChunkedAttention:
    """The reference and the bound of a case too large for one chunk, computed once per set of inputs."""
    return computed_once("attention chunks", problem, inputs64, lambda: _computed(problem, inputs64))


def _computed(problem: Problem, inputs64: Mapping[str, torch.Tensor]) -> ChunkedAttention:
    params = problem.params
    names = ("o", "lse") if params.return_lse else ("o",)
    values: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    bounds: dict[str, list] = {name: [] for name in names}
    for rows_range in query_chunks(params):
        sliced = query_slice(inputs64, rows_range)
        if blocks_keys(params):
            chunk = streamed_rows(problem, sliced, rows_range)
        else:
            rows = attention_rows(params, sliced, rows_range)
            chunk = StreamedRows({name: getattr(rows, name) for name in names}, rows_bound(problem, sliced, rows))
            del rows
        for name in names:
            values[name].append(chunk.values[name])
            bounds[name].append((rows_range, chunk.bounds[name]))
        del chunk, sliced  # the chunk's score-sized tensors go before the next chunk's come
        release_free_pages()
    return ChunkedAttention({name: torch.cat(parts, dim=QUERY_DIM[name]) for name, parts in values.items()},
                            {name: QueryChunked(tuple(parts), QUERY_DIM[name]) for name, parts in bounds.items()})
