"""The results store: runs, records once per case, and the readers calibration and PR selection build on."""
from __future__ import annotations

import sqlite3

import pytest

from e2egen.nightly.errors import NightlyError
from e2egen.nightly.store import Store
from test_nightly_support import synthetic_record


def fill(store: Store) -> None:
    for i, (run_id, started) in enumerate([("r1", "2025-01-12T02:00:00Z"), ("r2", "2025-01-13T02:00:00Z"),
                                           ("r3", "2025-01-14T02:00:00Z")]):
        store.upsert_run({"run_id": run_id, "global_seed": 20250112 + i, "started": started})
        store.add_record(synthetic_record(run_id, "s/gemm/a", metrics={"rms": 1e-4 * (i + 1), "max_eps_diff": 3.0},
                                          duration=1.0 + i, device="cpu"))
        store.add_record(synthetic_record(run_id, "s/gemm/b", metrics={"rms": 2e-3}, status="failed", reason="rms",
                                          duration=10.0, device="NVIDIA H100"))
        store.add_record(synthetic_record(run_id, "s/gemm/c", status="skipped", reason="no tf32", duration=0.001))


def test_records_are_stored_once_per_run_and_case(tmp_path):
    with Store(tmp_path / "e.sqlite") as store:
        fill(store)
        assert not store.add_record(synthetic_record("r1", "s/gemm/a", metrics={"rms": 9.0}))
        assert store.records("r1")[0].metrics["rms"] == pytest.approx(1e-4)  # the first record stays
        assert [r.run_id for r in store.runs()] == ["r1", "r2", "r3"]
        assert store.run("r2").counts == {"passed": 1, "failed": 1, "skipped": 1}
        assert store.latest_run().run_id == "r3" and store.previous_run("r3").run_id == "r2"
        assert store.previous_run("r1") is None


def test_readers_for_calibration_and_pr_selection(tmp_path):
    with Store(tmp_path / "e.sqlite") as store:
        fill(store)
        history = store.metric_history("s/gemm/a", "rms")
        assert [p.run_id for p in history] == ["r1", "r2", "r3"]
        assert [p.value for p in history] == pytest.approx([1e-4, 2e-4, 3e-4])
        assert all(p.tolerance == 1e-3 and not p.failed for p in history)
        assert history[2].ratio == pytest.approx(0.3)
        assert store.metric_history("s/gemm/b", "rms")[0].failed
        maxima = store.metric_maxima("rms")
        assert maxima[("s/gemm/a", "rms")] == pytest.approx(3e-4) and maxima[("s/gemm/b", "rms")] == pytest.approx(2e-3)
        assert store.metric_maxima("rms", run_ids=["r1"])[("s/gemm/a", "rms")] == pytest.approx(1e-4)
        assert ("s/gemm/a", "max_eps_diff") in store.metric_maxima()
        # Durations: median per case on a device; skipped cases say nothing about cost.
        assert store.durations("cpu") == {"s/gemm/a": 2.0}
        assert store.durations("NVIDIA H100") == {"s/gemm/b": 10.0}
        assert set(store.durations()) == {"s/gemm/a", "s/gemm/b"}
        assert store.headroom("r3") == {"s/gemm/a": pytest.approx(0.3), "s/gemm/b": pytest.approx(2.0)}


def test_run_headers_merge_and_resumes_keep_the_start(tmp_path):
    with Store(tmp_path / "e.sqlite") as store:
        store.upsert_run({"run_id": "r", "started": "2025-01-14T02:00:00Z", "global_seed": 5, "machine": {"cpus": 2}})
        store.upsert_run({"run_id": "r", "started": "2025-01-14T05:00:00Z", "ended": "2025-01-14T06:00:00Z",
                          "git_revision": "abc", "global_seed": 6})
        run = store.run("r")
        assert run.started == "2025-01-14T02:00:00Z" and run.ended == "2025-01-14T06:00:00Z"
        assert run.global_seed == 5 and run.git_revision == "abc" and run.machine == {"cpus": 2}


def test_a_file_that_is_not_a_store_is_a_user_error(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database")
    with pytest.raises(NightlyError, match="not a results store"):
        Store(bad)
    other = tmp_path / "other.sqlite"
    with Store(other):
        pass
    with sqlite3.connect(other) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(NightlyError, match="schema version 99"):
        Store(other)
