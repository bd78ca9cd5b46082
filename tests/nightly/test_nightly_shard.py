"""--shard I/N: disjoint, covering, balanced, deterministic parts; `e2egen merge` restores the whole run."""
from __future__ import annotations

import json

import pytest

from e2egen.nightly.merge import merge
from e2egen.nightly.shard import PER_CASE_FLOPS, ShardSpec, check_disjoint_cover, partition
from e2egen.nightly.store import Store
from test_nightly_support import TINY_GEMM, synthetic_record, tiny_project


def cases(n: int, flops=lambda i: 1000 * (i % 7 + 1)) -> list[dict]:
    return [{"id": f"s/gemm/c{i}/fwd/f16/nn/r0", "flops": flops(i)} for i in range(n)]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8])
def test_parts_are_disjoint_cover_everything_and_keep_case_order(count):
    all_cases = cases(23)
    split = partition(all_cases, count)
    overlap, missing = check_disjoint_cover(split.shards, [c["id"] for c in all_cases])
    assert not overlap and not missing
    assert len(split.shards) == count
    order = [c["id"] for c in all_cases]
    for shard in split.shards:
        assert list(shard) == sorted(shard, key=order.index)
    # Balanced by count when FLOPs are tiny next to the per-case floor: sizes differ by at most one.
    sizes = [len(s) for s in split.shards]
    assert max(sizes) - min(sizes) <= 1


def test_same_input_same_split_whatever_the_order():
    all_cases = cases(40, flops=lambda i: (i * 7919) % 1000 * PER_CASE_FLOPS)
    a = partition(all_cases, 4)
    b = partition(list(reversed(all_cases)), 4)
    assert a.fingerprint == b.fingerprint
    assert [set(s) for s in a.shards] == [set(s) for s in b.shards]


def test_balanced_by_flops_without_durations():
    heavy = [{"id": "big", "flops": 100 * PER_CASE_FLOPS}] + [{"id": f"small{i}", "flops": 0} for i in range(10)]
    split = partition(heavy, 2)
    assert split.basis == "flops"
    big_shard = next(s for s in split.shards if "big" in s)
    assert big_shard == ("big",)  # the heavy case alone, the ten small ones together


def test_recorded_durations_win_over_flops():
    # By FLOPs "a" is the heavy one; the store says "b" took 10 s: "b" goes alone.
    all_cases = [{"id": "a", "flops": 50 * PER_CASE_FLOPS}, {"id": "b", "flops": 0},
                 {"id": "c", "flops": 0}, {"id": "d", "flops": 0}]
    split = partition(all_cases, 2, durations={"a": 1.0, "b": 10.0, "c": 1.0, "d": 1.0})
    assert split.basis == "durations"
    assert ("b",) in split.shards
    # Cases without a recorded time are priced from their FLOPs at the recorded rate.
    partial = partition(all_cases, 2, durations={"b": 10.0, "c": 1.0})
    assert partial.basis == "durations+flops"


def test_shard_spec_round_trips():
    assert str(ShardSpec.parse(" 2/4")) == "2/4"
    assert partition(cases(4), 2).cases(ShardSpec(2, 2))


def test_shards_run_on_two_machines_merge_into_the_whole_run(tmp_path):
    project = tiny_project(tmp_path, TINY_GEMM)  # 16 cases
    ids = []
    for i in (1, 2):
        result = project.nightly("--shard", f"{i}/2", "--workers", "0", "--seed", "5", "--no-report",
                                 store=f"machine{i}/e2e.sqlite")
        assert result.returncode == 0, result.stdout + result.stderr
        with Store(tmp_path / f"machine{i}/e2e.sqlite", create=False) as store:
            (run,) = store.runs()
            assert run.shard == f"{i}/2" and run.partition.startswith("flops ")
            ids.append(sorted(store.recorded_case_ids(run.run_id)))
    manifest = [c["id"] for c in json.loads((tmp_path / "build/e2e/manifest.json").read_text())["cases"]]
    overlap, missing = check_disjoint_cover(ids, manifest)
    assert not overlap and not missing and abs(len(ids[0]) - len(ids[1])) <= 1

    # One shard as its store, the other as its records file.
    records_file = next((tmp_path / "machine2/runs").glob("*.jsonl"))
    result = project.e2egen("merge", "machine1/e2e.sqlite", str(records_file), "--store", "all.sqlite", "--run-id", "night")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning" not in result.stderr
    with Store(tmp_path / "all.sqlite", create=False) as store:
        run = store.run("night")
        assert run.global_seed == 5 and run.selected == 16 and len(run.merged_from) == 2 and run.ended
        merged = store.records("night")
        assert sorted(r.case_id for r in merged) == sorted(manifest)
        assert store.latest_run().run_id == "night"
    with Store(tmp_path / "machine1/e2e.sqlite", create=False) as shard_store:
        original = {r.case_id: r.metrics for r in shard_store.records(shard_store.latest_run().run_id)}
    assert all({r.case_id: r.metrics for r in merged}[cid] == m for cid, m in original.items())


def test_merge_keeps_each_case_once_and_warns_about_overlap_and_missing_shards(tmp_path):
    lines = []
    for run_id, shard, ids in [("a", "1/3", ["x/gemm/1", "x/gemm/2"]), ("b", "2/3", ["x/gemm/2", "x/gemm/3"])]:
        path = tmp_path / f"{run_id}.jsonl"
        objs = [{"type": "run", "run_id": run_id, "global_seed": 9, "started": f"2025-01-0{len(lines) + 1}T00:00:00Z",
                 "shard": shard, "selected": 2}]
        objs += [synthetic_record(run_id, cid).to_dict() for cid in ids]
        objs.append({"type": "run_end", "run_id": run_id, "ended": "2025-01-05T00:00:00Z"})
        path.write_text("".join(json.dumps(o) + "\n" for o in objs))
        lines.append(path)
    result = merge([str(p) for p in lines], tmp_path / "m.sqlite", "m")
    assert result.cases == 3 and result.duplicates == 1
    assert any("more than one shard" in w for w in result.warnings)
    assert any("3/3 are missing" in w for w in result.warnings)
    with Store(tmp_path / "m.sqlite") as store:
        assert sorted(store.recorded_case_ids("m")) == ["x/gemm/1", "x/gemm/2", "x/gemm/3"]
        assert store.run("m").started == "2025-01-01T00:00:00Z"


def test_merging_runs_of_one_store_marks_the_parts(tmp_path):
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        for run_id, cid in [("p1", "x/gemm/1"), ("p2", "x/gemm/2")]:
            store.upsert_run({"run_id": run_id, "global_seed": 1, "started": "2025-01-01T00:00:00Z", "shard": f"{run_id[1]}/2"})
            store.add_record(synthetic_record(run_id, cid))
    merge(["p1", "p2"], path, "whole")
    with Store(path) as store:
        assert [r.run_id for r in store.report_runs()] == ["whole"]
        assert store.run("p1").merged_into == "whole"
        assert store.records("whole")[0].run_id == "whole"
