"""Damaged arithmetic profiles: the command names the file and exits 2; a run probes again instead."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REPO
from e2egen.runner.arithmetic import lookup
from e2egen.runner.arithmetic.model import Arithmetic, CellKey
from e2egen.runner.arithmetic.profile import DeviceKey, ProfileError, find_profiles, read_profile, record_in_cache

# Verdicts on torch's own CPU kernels or their measured arithmetic: they depend on the CPU path torch takes
# (AVX2 or AVX-512, oneDNN's formats), so .ci/run runs them on both (make test-avx2).
pytestmark = pytest.mark.cpu_paths

KEY = DeviceKey.of("cpu", "torch", {"torch": "0.0"})
DAMAGED = {"not toml": 'device = "cpu"\nimpl = [', "cells not a table": (  # a bad entry alone is dropped, the rest
    'device = "cpu"\nimpl = "torch"\n[versions]\ntorch = "0.0"\ncells = 3\n')}  # kept: test_profile_cache_hardening


@pytest.mark.parametrize("kind", sorted(DAMAGED))
def test_a_damaged_profile_is_a_user_error_naming_the_file(tmp_path, kind):
    path = tmp_path / KEY.file_name
    path.write_text(DAMAGED[kind], encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        read_profile(path)
    assert info.value.where == str(path) and "e2egen arithmetic" in str(info.value)


def test_runs_look_past_a_damaged_cache_and_rewrite_it(tmp_path, monkeypatch):
    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path))
    lookup.forget()
    path = Path(tmp_path) / KEY.cache_file_name
    path.write_text(DAMAGED["not toml"], encoding="utf-8")
    with pytest.warns(RuntimeWarning, match="probe the cells it held again"):  # skipped, and said so: its cells are lost
        assert find_profiles(KEY) == []  # the shipped profiles are for other versions
    cell = CellKey("gemm", "fwd", "f32", "nn")
    record_in_cache(KEY, cell, Arithmetic(acc_bits=11))
    assert read_profile(path).get(cell).acc_bits == 11


def test_an_unchanged_cache_is_parsed_once_and_a_rewrite_is_seen(tmp_path, monkeypatch):
    from e2egen.runner.arithmetic import profile as profiles

    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path))
    lookup.forget()
    first, second = CellKey("gemm", "fwd", "f32", "nn"), CellKey("gemm", "fwd", "f32", "tt")
    record_in_cache(KEY, first, Arithmetic(acc_bits=24))
    profiles._shipped()  # parsed once per process, whichever test comes first: not what is counted here
    parsed = []
    original = profiles.Profile.from_toml
    monkeypatch.setattr(profiles.Profile, "from_toml",
                        staticmethod(lambda *a, **k: parsed.append(1) or original(*a, **k)))
    for _ in range(5):
        assert find_profiles(KEY)[0].get(first).acc_bits == 24
    assert len(parsed) == 1
    record_in_cache(KEY, second, Arithmetic(acc_bits=11))  # another worker adds a cell: a new file
    assert find_profiles(KEY)[0].get(second).acc_bits == 11


NAME = st.text(st.characters(blacklist_characters="/", blacklist_categories=("Cs",)), min_size=1, max_size=12)


@given(op=NAME, direction=NAME, dtype=NAME, layout=NAME,
       shape=st.text(st.characters(blacklist_categories=("Cs",)), max_size=24))
def test_a_cell_key_reads_back_as_written_even_with_slashes_in_its_shape_class(op, direction, dtype, layout, shape):
    key = CellKey(op, direction, dtype, layout, shape)
    assert CellKey.parse(str(key)) == key


@pytest.mark.parametrize("field", ["op", "direction", "dtype", "layout"])
def test_a_slash_outside_the_shape_class_is_refused(field):
    names = dict(op="gemm", direction="fwd", dtype="f32", layout="nn")
    names[field] = "a/b"
    with pytest.raises(ValueError, match=field):
        CellKey(**names)


def test_every_catalogue_cell_reads_back_from_a_profile():
    """Each case's cell (its shape class included) survives a profile's write and read: a cell that did not
    (a scaled gemm's, with '/' in its shape class) made the whole cached profile unreadable, so every later
    run probed every kernel again and rewrote the cache with one cell."""
    from e2egen.generator.cases import expand
    from e2egen.generator.loader import load_catalogue
    from e2egen.runner.arithmetic.profile import Profile

    catalogue = REPO / "configs.toml"
    cells = {lookup.cell_of(case.problem()) for case in expand(load_catalogue(catalogue))}
    assert any("/" in cell.shape for cell in cells)  # the case this guards: scaled gemms
    profile = Profile(KEY, {str(cell): Arithmetic() for cell in cells})
    assert set(Profile.from_toml(profile.to_toml()).cells) == {str(cell) for cell in cells}


def test_a_cell_with_slashes_in_its_shape_class_keeps_the_cache_readable(tmp_path, monkeypatch):
    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path))
    lookup.forget()
    gemm = CellKey("gemm", "fwd", "f32", "nn")
    scaled = CellKey("scaled_gemm", "fwd", "f8e4m3fn", "nt", "mx32/e8m0-e8m0/out-f32")
    record_in_cache(KEY, gemm, Arithmetic(acc_bits=24))
    record_in_cache(KEY, scaled, Arithmetic(acc_bits=11))
    (cached,) = find_profiles(KEY)
    assert cached.get(gemm).acc_bits == 24 and cached.get(scaled).acc_bits == 11


def _record_cells(directory: str, layouts: list[str]) -> None:
    import os

    os.environ["E2EGEN_PROFILES"] = directory
    for layout in layouts:
        record_in_cache(KEY, CellKey("gemm", "fwd", "f32", layout), Arithmetic())


def test_processes_recording_at_once_keep_every_cell(tmp_path):
    """Several workers add cells at the same moment: each reads, adds and rewrites under a file lock, so none
    writes back a copy that misses another's cell."""
    import multiprocessing

    from conftest import HANG_LIMIT  # here, not at the top: each spawned worker imports this module

    batches = [[f"w{worker}-{i}" for i in range(15)] for worker in range(4)]
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_record_cells, args=(str(tmp_path), batch)) for batch in batches]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(HANG_LIMIT)  # spawned: each starts a fresh interpreter, slow on a loaded machine
        assert worker.exitcode == 0, f"worker exit code {worker.exitcode} (None: still running after {HANG_LIMIT} s)"
    cells = read_profile(Path(tmp_path) / KEY.cache_file_name).cells
    assert set(cells) == {str(CellKey("gemm", "fwd", "f32", layout)) for batch in batches for layout in batch}


def test_the_shipped_cpu_profiles_hold_every_probed_cell_of_the_catalogue():
    """docs/concepts/arithmetic-profiles.md: each shipped profile of torch on the CPU (one per CPU path) holds every cell of configs.toml that
    has probes, so a fresh machine on that path probes nothing (`e2egen arithmetic --out
    runner/arithmetic/profiles` writes one again). The cells they leave out are those whose probes cannot run
    (checked on this machine's path)."""
    import torch

    from e2egen.generator.cases import expand
    from e2egen.generator.loader import load_catalogue
    from e2egen.runner.arithmetic.profile import shipped_profiles
    from e2egen.runner.errors import KernelFailure, Skip
    from e2egen.runner.kernels import case_kernel

    shipped = [p for p in shipped_profiles() if p.key.device == "cpu" and p.key.impl == "torch"]
    assert len(shipped) >= 3  # AVX2; AVX-512 with oneDNN bf16; AVX-512 with oneDNN bf16+f16
    catalogue = REPO / "configs.toml"
    problems = {}
    for case in expand(load_catalogue(catalogue)):
        problem = case.problem()
        if case.impl in (None, "torch") and lookup.not_probed(problem) is None:
            problems.setdefault(str(lookup.cell_of(problem)), problem)
    for profile in shipped:
        missing = sorted(set(problems) - set(profile.cells))
        assert len(missing) < len(problems) // 50, (profile.path, missing)  # a few at most, else it is stale
    here = lookup.device_key(torch.device("cpu"), "torch")
    missing = sorted(set().union(*(set(problems) - set(p.cells) for p in shipped if p.key == here)))
    for cell in missing:
        problem = problems[cell]
        with pytest.raises((Skip, KernelFailure)):
            lookup.probe_cell(problem, case_kernel(problem), torch.device("cpu"), "torch")


def test_the_arithmetic_command_probes_every_kind_of_op_as_runs_do(tmp_path):
    """`e2egen arithmetic` takes the run's own path (the op's own probes, torch's widened low-bit kernels,
    integer cells not probed): it once tried the product-sum probes on attention and died with a traceback."""
    from conftest import run_cli

    result = run_cli("arithmetic", "--filter", "op=attention,exp,sum,scaled_gemm,gemm dtype=f32,i8 pr=yes",
                     "--device", "cpu", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    (written,) = Path(tmp_path).glob("cpu-torch*.toml")  # named by the CPU path it was measured on
    cells = read_profile(written).cells
    ops = {name.split("/")[0] for name in cells}
    assert {"attention", "exp", "sum", "gemm"} <= ops
    assert not any(name.split("/")[2] == "i8" for name in cells)  # integer arithmetic: nothing to probe


def test_findings_of_another_probes_revision_are_not_used(tmp_path, monkeypatch):
    """Profiles carry the probes' revision: the shipped one this code's, and a cache written by older probes
    is probed again rather than trusted."""
    import torch

    from e2egen.runner.arithmetic.model import PROBES_REVISION as REVISION
    from e2egen.runner.arithmetic.profile import shipped_profiles

    assert all(dict(p.key.versions).get("probes") == str(REVISION) for p in shipped_profiles())
    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path))
    lookup.forget()
    current = lookup.device_key(torch.device("cpu"), "torch")
    assert dict(current.versions)["probes"] == str(REVISION)
    older = DeviceKey.of(current.device, current.impl, {**dict(current.versions), "probes": str(REVISION - 1)})
    record_in_cache(older, CellKey("gemm", "fwd", "f32", "nn"), Arithmetic(acc_bits=11))
    assert not any(p.path == Path(tmp_path) / current.cache_file_name for p in find_profiles(current))


def test_a_damaged_cache_is_parsed_and_said_once_even_with_warnings_as_errors(tmp_path, monkeypatch, capsys):
    """Every case looks its cell up: a damaged cache is not parsed again for each, and a run under -W error
    still goes on (the warning becomes a line on stderr)."""
    import warnings

    from e2egen.runner.arithmetic import profile as profiles

    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path))
    monkeypatch.setattr(profiles, "_warned", set())
    lookup.forget()
    (Path(tmp_path) / KEY.cache_file_name).write_text(DAMAGED["cells not a table"], encoding="utf-8")
    parsed = []
    original = profiles.Profile.from_toml
    monkeypatch.setattr(profiles.Profile, "from_toml", staticmethod(lambda *a, **k: parsed.append(1) or original(*a, **k)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(5):
            assert find_profiles(KEY) == []
    assert len(parsed) == 1
    assert capsys.readouterr().err.count("warning: ") == 1


def test_environments_with_other_versions_keep_a_cache_file_each(tmp_path, monkeypatch):
    """Two checkouts (other torch, other probes) sharing one cache directory: each keeps its own file, so
    switching between them neither drops the other's cells nor makes either probe again."""
    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path))
    lookup.forget()
    other = DeviceKey.of(KEY.device, KEY.impl, {**dict(KEY.versions), "torch": "9.9"})
    cell = CellKey("gemm", "fwd", "f32", "nn")
    record_in_cache(KEY, cell, Arithmetic(acc_bits=11))
    record_in_cache(other, cell, Arithmetic(acc_bits=24))
    record_in_cache(KEY, CellKey("gemm", "fwd", "f16", "nn"), Arithmetic(acc_bits=11))
    assert KEY.cache_file_name != other.cache_file_name and KEY.file_name == other.file_name
    assert sorted(p.name for p in Path(tmp_path).glob("*.toml")) == sorted([KEY.cache_file_name, other.cache_file_name])
    assert read_profile(Path(tmp_path) / other.cache_file_name).get(cell).acc_bits == 24
    mine = read_profile(Path(tmp_path) / KEY.cache_file_name)
    assert mine.get(cell).acc_bits == 11 and len(mine.cells) == 2
    assert [p.get(cell).acc_bits for p in find_profiles(other) if not p.shipped] == [24]
