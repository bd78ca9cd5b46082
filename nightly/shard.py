"""Split a sweep's cases into N disjoint, balanced shards, the same way on every machine.

Each case weighs its expected time: its median recorded duration on this
device when the store has one, else its FLOPs (plus a per-case floor for the
fixed cost of generating inputs and launching) scaled to seconds by the rate
the recorded cases show. Cases go, heaviest first, to the lightest shard
(longest-processing-time first: within 4/3 of the best possible makespan).
Ties break on the case id and the shard index, so the split is a pure
function of (cases, weights, N): every shard machine must see the same store
(e.g. the previous night's database) or none. The partition's fingerprint is
recorded with each shard run, and merge warns when shards disagree.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Iterable, Literal, Mapping, Sequence

from e2egen.nightly.errors import NightlyError

# FLOPs a case costs beyond its arithmetic (inputs, launch, reference, compare),
# so that a sweep of tiny cases is balanced by count rather than all on one shard.
PER_CASE_FLOPS = 10_000_000


@dataclass(frozen=True)
class ShardSpec:
    index: int  # 1-based
    count: int

    @classmethod
    def parse(cls, text: str) -> "ShardSpec":
        match = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text or "")  # ASCII digits: not "１/２"
        if not match:
            raise NightlyError(f"--shard: expected I/N, the I-th of N shards counting from 1 (e.g. 2/4), got {text!r}")
        index, count = int(match.group(1)), int(match.group(2))
        if count < 1 or not 1 <= index <= count:
            raise NightlyError(f"--shard {text}: I must be between 1 and N, and N at least 1 (e.g. 1/{max(count, 2)})")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


# What a partition's weights came from: recorded durations for every case, for some (FLOPs priced at their
# rate for the rest), or FLOPs alone.
WeightBasis = Literal["durations", "durations+flops", "flops"]


@dataclass(frozen=True)
class Partition:
    shards: tuple[tuple[str, ...], ...]  # case ids per shard, in the input order
    loads: tuple[float, ...]  # the weight each shard got
    basis: WeightBasis
    fingerprint: str  # short hash of the assignment: equal on every machine that computed the same split

    def cases(self, spec: ShardSpec) -> tuple[str, ...]:
        if spec.count != len(self.shards):
            raise NightlyError(f"--shard {spec}: this partition has {len(self.shards)} shards")
        return self.shards[spec.index - 1]


def case_weights(cases: Sequence[Mapping], durations: Mapping[str, float] | None = None
                 ) -> tuple[dict[str, float], WeightBasis]:
    """case id -> expected cost, and the basis it came from."""
    flops = {c["id"]: float(c.get("flops") or 0) + PER_CASE_FLOPS for c in cases}
    known = {cid: float(durations[cid]) for cid in flops if durations and cid in durations and durations[cid] > 0}
    if not known:
        return flops, "flops"
    # Seconds per FLOP over the cases with a recorded time: prices the rest in seconds too.
    rate = sum(known.values()) / sum(flops[cid] for cid in known)
    weights = {cid: known.get(cid, flops[cid] * rate) for cid in flops}
    return weights, "durations" if len(known) == len(flops) else "durations+flops"


def partition(cases: Sequence[Mapping], count: int, durations: Mapping[str, float] | None = None) -> Partition:
    """Split `cases` (manifest case dicts) into `count` shards of balanced expected time."""
    if count < 1:
        raise NightlyError(f"cannot split into {count} shards")
    weights, basis = case_weights(cases, durations)
    loads = [0.0] * count
    assignment: dict[str, int] = {}
    for cid in sorted(weights, key=lambda c: (-weights[c], c)):
        shard = min(range(count), key=lambda s: (loads[s], s))
        assignment[cid] = shard
        loads[shard] += weights[cid]
    order = [c["id"] for c in cases]
    shards = tuple(tuple(cid for cid in order if assignment[cid] == s) for s in range(count))
    return Partition(shards, tuple(loads), basis, fingerprint(assignment))


def fingerprint(assignment: Mapping[str, int]) -> str:
    digest = hashlib.sha256()
    for cid in sorted(assignment):
        digest.update(f"{cid}\t{assignment[cid]}\n".encode())
    return digest.hexdigest()[:12]


def check_disjoint_cover(parts: Iterable[Iterable[str]], universe: Iterable[str]) -> tuple[set[str], set[str]]:
    """(case ids in more than one part, case ids in no part)."""
    seen: set[str] = set()
    overlap: set[str] = set()
    for part in parts:
        part = set(part)
        overlap |= seen & part
        seen |= part
    return overlap, set(universe) - seen
