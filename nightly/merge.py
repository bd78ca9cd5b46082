"""Combine the shards of a sweep (their stores or records files) into one run.

    merge(["shard1.sqlite", "shard2.jsonl", "RUN_ID"], store="results/e2e.sqlite") -> MergeResult

Each input is a records file (.jsonl: every case in it), a store file (its
latest run, or PATH#RUN_ID for another), or the id of a run already in the
target store. The merged run gets a new id; its seed, catalogue and revision
come from the shards, its start and end span theirs, and its machine lists
every shard's. A case recorded by two shards is kept once (the first input
wins) and reported. Shard runs in the target store are marked merged_into,
so reports compare the merged run, not its parts.

A merge that lacks shards of the split (its headers say I/N and some I is not
given), mixes shards of different splits, has an input that records fewer cases
than its run planned (a damaged line) or whose inputs never finished is
incomplete: MergeResult.incomplete
says why, the merged run gets no end time (`e2egen runs` lists it as
incomplete, its report says so), and `e2egen merge` exits 3, never "all passed".

Every input is read and checked before the target store is touched (a records
line that is not a valid record is a RecordsError naming file:line, a damaged
or foreign store a StoreError naming it), and the merged run is written in one
transaction: it is in the store whole, or not at all.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from e2egen.nightly import machine
from e2egen.nightly.errors import NightlyError
from e2egen.nightly.records import check_run_id, new_run_id, read_records_file
from e2egen.nightly.shard import ShardSpec
from e2egen.nightly.store import Store, is_sqlite_file, iter_store_records

@dataclass(frozen=True)
class ShardInput:
    source: str  # as given
    headers: tuple[dict, ...]  # run headers (a resumed run's file has several)
    cases: tuple[dict, ...]
    ended: str | None
    store_run_id: str | None = None  # the run's id when it lives in the target store


@dataclass(frozen=True)
class MergeResult:
    run_id: str
    cases: int
    duplicates: int
    warnings: tuple[str, ...]
    counts: dict
    incomplete: tuple[str, ...] = ()  # why the merged run is not a whole run: shards missing, shards unfinished

    @property
    def complete(self) -> bool:
        return not self.incomplete


def read_input(source: str, target: Store) -> ShardInput:
    path_text, _, run_id = source.partition("#")
    path = Path(path_text)
    if path.is_file():
        if is_sqlite_file(path):
            same = path.resolve() == target.path.resolve()
            objects = list(iter_store_records(path, run_id or None)) if not same else None
            if same:
                run = target.run(run_id) if run_id else target.latest_run()
                return _from_objects(source, _objects_of(target, run.run_id), store_run_id=run.run_id)
            return _from_objects(source, objects)
        return _from_objects(source, list(read_records_file(path, validate=True)))
    if target.has_run(source):
        return _from_objects(source, _objects_of(target, source), store_run_id=source)
    raise NightlyError(f"merge: {source!r} is neither a records file, a store file nor a run id in {target.path}")


def _objects_of(store: Store, run_id: str) -> list[dict]:
    run = store.run(run_id)
    header = {"type": "run", "run_id": run.run_id, "global_seed": run.global_seed, "started": run.started,
              "machine": run.machine, "device": run.device, "catalogue": run.catalogue,
              "catalogue_sha256": run.catalogue_sha256, "git_revision": run.git_revision, "git_dirty": run.git_dirty,
              "shard": run.shard, "partition": run.partition, "selected": run.selected}
    objects = [header, *(r.to_dict() for r in store.records(run_id))]
    if run.ended:
        objects.append({"type": "run_end", "run_id": run_id, "ended": run.ended})
    return objects


def _from_objects(source: str, objects: Iterable[dict], store_run_id: str | None = None) -> ShardInput:
    headers, cases, ended = [], [], None
    for obj in objects:
        kind = obj.get("type")
        if kind == "run":
            headers.append(obj)
        elif kind == "case":
            cases.append(obj)
        elif kind == "run_end" and obj.get("ended"):
            ended = max(ended or "", obj["ended"])
    if not headers and not cases:
        raise NightlyError(f"merge: {source}: holds no run and no case records")
    return ShardInput(source, tuple(headers), tuple(cases), ended, store_run_id)


def merge(sources: Sequence[str], store_path: str | Path, run_id: str | None = None) -> MergeResult:
    if not sources:
        raise NightlyError("merge: give the shards to merge (records files, store files or run ids)")
    if run_id is not None:
        check_run_id(run_id, "--run-id")
    with Store(store_path) as target, target.transaction():
        inputs = [read_input(s, target) for s in sources]
        run_id = run_id or new_run_id()
        if target.has_run(run_id):
            raise NightlyError(f"merge: run {run_id} already exists in {target.path}; choose another --run-id")
        warnings = _consistency_warnings(inputs)
        incomplete = _incompleteness(inputs)
        header = _merged_header(run_id, inputs)
        target.upsert_run(header)
        seen: set[str] = set()
        objects, duplicates = [], 0
        for shard in inputs:
            for case in shard.cases:
                if case["case_id"] in seen:
                    duplicates += 1
                    continue
                seen.add(case["case_id"])
                objects.append(case)
        if duplicates:
            warnings.append(f"{duplicates} cases were recorded by more than one shard; kept the first input's record")
        target.ingest(objects, run_id=run_id)
        ended = [s.ended for s in inputs]
        if all(ended) and not incomplete:  # a merge missing shards is never an ended, whole run
            target.upsert_run({"run_id": run_id, "ended": max(ended)})
        for shard in inputs:
            if shard.store_run_id:
                target.set_run_fields(shard.store_run_id, merged_into=run_id)
        counts = target.status_counts(run_id)
    return MergeResult(run_id, len(seen), duplicates, tuple(warnings), counts, tuple(incomplete))


def _incompleteness(inputs: Sequence[ShardInput]) -> list[str]:
    """Why the merged run is not a whole run: the shards of the split not given, the shards that never ended."""
    reasons = []
    specs = []
    for shard in inputs:
        for h in shard.headers[:1]:
            if not h.get("shard"):
                continue
            try:
                specs.append(ShardSpec.parse(h["shard"]))
            except NightlyError:  # said by _consistency_warnings
                pass
    counts = {spec.count for spec in specs}
    if len(counts) == 1:
        count = counts.pop()
        missing = sorted(set(range(1, count + 1)) - {s.index for s in specs})
        if missing:
            reasons.append(f"shard{'s' if len(missing) > 1 else ''} {', '.join(f'{i}/{count}' for i in missing)} "
                           f"missing ({len(missing)} of {count})")
    elif len(counts) > 1:  # no one split says which cases the whole run holds
        reasons.append(f"the shards come from different splits ({', '.join(sorted(str(s) for s in specs))}): "
                       f"merge the shards of one split")
    for shard in inputs:  # a case its run planned but no line records (a damaged line, a lost append)
        planned = shard.headers[0].get("selected") if shard.headers else None
        recorded = len({case.get("case_id") for case in shard.cases})
        if isinstance(planned, int) and recorded < planned and shard.ended is not None:
            reasons.append(f"{shard.source} records {recorded} of the {planned} cases its run planned")
    unfinished = [s.source for s in inputs if s.ended is None]
    if unfinished:
        reasons.append(f"{len(unfinished)} input{'s' if len(unfinished) > 1 else ''} never finished "
                       f"({', '.join(unfinished[:5])}{' …' if len(unfinished) > 5 else ''}): resume "
                       f"{'them' if len(unfinished) > 1 else 'it'} with `e2egen nightly --resume RUN_ID` first")
    return reasons


def _consistency_warnings(inputs: Sequence[ShardInput]) -> list[str]:
    warnings = []
    def distinct(key: str) -> set:
        return {h.get(key) for s in inputs for h in s.headers[:1] if h.get(key) is not None}

    if len(seeds := distinct("global_seed")) > 1:
        warnings.append(f"the shards ran with different global seeds {sorted(seeds)}: their inputs differ")
    if len(shas := distinct("catalogue_sha256")) > 1:
        warnings.append(f"the shards ran {len(shas)} different catalogues (sha256 differs)")
    if len(parts := distinct("partition")) > 1:
        warnings.append(f"the shards split the cases differently ({', '.join(sorted(parts))}): "
                        "give every shard the same store (or none) so they compute the same split")
    specs = []
    for shard in inputs:
        for h in shard.headers[:1]:
            if h.get("shard"):
                try:
                    specs.append(ShardSpec.parse(h["shard"]))
                except NightlyError:
                    warnings.append(f"{shard.source}: its run header's shard {h['shard']!r} is not I/N; ignored")
    if specs:
        counts = {spec.count for spec in specs}
        if len(counts) > 1:
            warnings.append(f"the shards come from different splits: {', '.join(sorted(str(s) for s in specs))}")
        else:
            count = counts.pop()
            missing = sorted(set(range(1, count + 1)) - {s.index for s in specs})
            if missing:
                warnings.append(f"shards {', '.join(f'{i}/{count}' for i in missing)} are missing: the merged run is partial")
    if any(s.ended is None for s in inputs):
        warnings.append("some shards never finished (killed?): resume them with `e2egen nightly --resume RUN_ID` first")
    return warnings


def _merged_header(run_id: str, inputs: Sequence[ShardInput]) -> dict[str, Any]:
    first = [s.headers[0] if s.headers else {} for s in inputs]
    started = [h["started"] for s in inputs for h in s.headers if h.get("started")]
    machines = [h.get("machine") for h in first if h.get("machine")]
    unique_machines = list({json.dumps(m, sort_keys=True): m for m in machines}.values())
    devices = sorted({h["device"] for h in first if h.get("device")})
    selected = [h.get("selected") for h in first]
    base = next((h for h in first if h), {})
    return {
        "run_id": run_id, "global_seed": base.get("global_seed"),
        "started": min(started) if started else machine.utc_now(),
        "machine": unique_machines[0] if len(unique_machines) == 1 else {"shards": unique_machines},
        "device": ", ".join(devices) or None,
        "catalogue": base.get("catalogue"), "catalogue_sha256": base.get("catalogue_sha256"),
        "git_revision": base.get("git_revision"), "git_dirty": base.get("git_dirty"),
        "partition": base.get("partition"),
        "selected": sum(selected) if selected and all(isinstance(n, int) for n in selected) else None,
        "merged_from": [h.get("run_id") or s.source for s, h in zip(inputs, first)],
    }
