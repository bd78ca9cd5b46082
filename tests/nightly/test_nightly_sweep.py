"""The nightly sweep end to end: every case recorded once, crashes survived, kill and resume, exit statuses."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import time

import pytest

from conftest import wait_until
from e2egen.cli import main
from e2egen.generator.cases import derive_seed
from e2egen.invocation import e2egen_command
from e2egen.nightly.records import read_records_file
from e2egen.nightly.store import Store
from test_nightly_support import CRASHING_GEMM, SLOW_GEMM, tiny_project

TIMING_KEYS = {"inputs", "kernel", "reference", "compare"}


def case_lines(path) -> list[dict]:
    return [obj for obj in read_records_file(path) if obj.get("type") == "case"]


def test_sweep_records_every_case_once_and_survives_a_crashing_case(tmp_path):
    project = tiny_project(tmp_path, CRASHING_GEMM)  # 12 conv cases + 4 gemm, 2 of which abort their process
    before = dt.datetime.now(dt.timezone.utc).date()
    result = project.nightly("--workers", "2", "--reference", "device")
    after = dt.datetime.now(dt.timezone.utc).date()
    assert result.returncode == 1, result.stdout + result.stderr  # some failed
    assert "Traceback" not in result.stderr

    with Store(tmp_path / "results/e2e.sqlite", create=False) as store:
        (run,) = store.runs()
        records = store.records(run.run_id)
        manifest = json.loads((tmp_path / "build/e2e/manifest.json").read_text())
        assert sorted(r.case_id for r in records) == sorted(c["id"] for c in manifest["cases"])  # each once
        assert len(records) == 16

        # The global seed: by default the date, printed and recorded; every case's seed derives from it.
        seeds = {int(d.strftime("%Y%m%d")) for d in (before, after)}
        assert run.global_seed in seeds
        assert f"global seed {run.global_seed} (from the date)" in result.stdout
        assert all(r.seed == derive_seed(run.global_seed, r.case_id) for r in records)
        assert run.started and run.ended and run.selected == 16 and run.machine["cpus"]

        crashed = [r for r in records if r.status == "failed"]
        assert sorted(r.case_id for r in crashed) == ["mm/gemm/m8/fwd/f32/tt/r0", "mm/gemm/m8/fwd/f32/tt/r4"]
        assert all(r.phase == "crash" and "crashed" in r.reason and r.repro.startswith(f"{e2egen_command()} run ") for r in crashed)

        passed = [r for r in records if r.status == "passed"]
        assert len(passed) == 14
        for r in passed:
            assert r.device == "cpu" and r.versions["torch"]
            assert TIMING_KEYS <= set(r.timings) and r.duration > 0
            assert set(r.tolerances) <= set(r.metrics) and r.histogram and sum(r.histogram.values()) > 0
            assert r.comparison and "worst" in r.comparison
            assert r.reference["device"] == "device" and r.reference_variant == "device"  # --reference overrides the catalogue
            assert {"dtype", "direction", "layout", "range", "suite"} <= set(r.axes)
        assert store.status_counts(run.run_id) == {"passed": 14, "failed": 2}

    lines = case_lines(run.records_path)
    assert sorted(o["case_id"] for o in lines) == sorted(r.case_id for r in records)
    assert (tmp_path / f"results/reports/report-{run.run_id}.html").exists()
    assert (tmp_path / f"results/reports/report-{run.run_id}.md").exists()


def test_a_run_killed_halfway_resumes_and_records_every_case_exactly_once(tmp_path):
    # The 8 gemm cases of 0.3 s each, run in-process; --filter leaves the conv suite out of the run.
    project = tiny_project(tmp_path, SLOW_GEMM)
    sweep = subprocess.Popen(project.command("--workers", "0", "--seed", "3", "--no-report", "--filter", "op=gemm"),
                             cwd=tmp_path, env=project.env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def three_recorded():
        found = list((tmp_path / "results/runs").glob("*.jsonl")) if (tmp_path / "results/runs").exists() else []
        return found[0] if found and len(case_lines(found[0])) >= 3 else None

    try:
        # Killed once 3 cases are recorded, however long a loaded machine takes to get there.
        records = wait_until(three_recorded, process=sweep)
        assert records is not None, f"the sweep recorded fewer than 3 cases (it ended: exit {sweep.poll()}, or hung)"
    finally:
        sweep.kill()  # SIGKILL
        sweep.communicate()
    time.sleep(1.0)  # the pytest child dies with the sweep: nothing may append any more
    killed_at = case_lines(records)
    assert 3 <= len(killed_at) < 8
    time.sleep(0.5)
    assert len(case_lines(records)) == len(killed_at)

    run_id = records.stem
    result = project.nightly("--workers", "0", "--resume", run_id, "--no-report")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"resuming: {len(killed_at)} cases already recorded" in result.stdout
    lines = case_lines(records)
    assert len(lines) == 8 and len({o["case_id"] for o in lines}) == 8  # the file: each case once
    assert {o["case_id"]: o["finished"] for o in killed_at}.items() <= {o["case_id"]: o["finished"] for o in lines}.items()
    with Store(tmp_path / "results/e2e.sqlite", create=False) as store:
        (run,) = store.runs()
        assert run.run_id == run_id and run.global_seed == 3 and run.ended
        assert sorted(store.recorded_case_ids(run_id)) == sorted(o["case_id"] for o in lines)
        assert all(cid.startswith("mm/gemm/") for cid in store.recorded_case_ids(run_id)) and run.selected == 8
        assert store.status_counts(run_id) == {"passed": 8}
        # Ingesting the file again (dedupe on ingest) adds nothing.
        assert store.ingest_file(records).added == 0


def test_user_errors_exit_2_with_one_message(tmp_path, capsys):
    store = str(tmp_path / "e2e.sqlite")
    for argv, message in [
        (["nightly", "--shard", "3/2", "--store", store], "--shard 3/2: I must be between 1 and N"),
        (["nightly", "--shard", "two", "--store", store], "--shard: expected I/N"),
        (["nightly", "--resume", "no-such-run", "--store", store], "unknown run id 'no-such-run'"),
        (["report", "no-such-run", "--store", store], "unknown run id 'no-such-run'"),
        (["report", "--store", str(tmp_path / "missing.sqlite")], "no results store here"),
        (["merge", str(tmp_path / "nothing.jsonl"), "--store", store], "neither a records file"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and "Traceback" not in err, (argv, err)


def test_recorder_is_inactive_without_record(tmp_path):
    project = tiny_project(tmp_path)
    assert project.e2egen("gen", "configs.toml", "--out", "build/e2e").returncode == 0
    result = subprocess.run([*project.command()[:1], "-m", "pytest", "build/e2e", "-q", "-p", "no:cacheprovider",
                             "-k", "fwd and f32"], cwd=tmp_path, env=project.env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not list(tmp_path.rglob("*.jsonl"))


@pytest.mark.parametrize("bad", ["0/2", "1/0", "1-2", "", "\uff11/\uff12", "1_0/20", "\u0663/4"])
def test_bad_shard_specs_are_refused(bad):
    from e2egen.nightly.errors import NightlyError
    from e2egen.nightly.shard import ShardSpec

    with pytest.raises(NightlyError, match="--shard"):
        ShardSpec.parse(bad)


def test_each_xdist_worker_is_pinned_to_its_own_gpu(monkeypatch):
    from e2egen.nightly.sweep_plugin import pin_worker_gpu

    monkeypatch.setenv("E2E_WORKER_GPUS", "3,5")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for worker, gpu in [("gw0", "3"), ("gw1", "5"), ("gw2", "3")]:
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        assert pin_worker_gpu() == gpu and os.environ["CUDA_VISIBLE_DEVICES"] == gpu
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    assert pin_worker_gpu() is None and os.environ["CUDA_VISIBLE_DEVICES"] == "7"  # not a worker: untouched
