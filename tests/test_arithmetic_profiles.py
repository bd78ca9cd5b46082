"""Damaged arithmetic profiles: the command names the file and exits 2; a run probes again instead."""
from __future__ import annotations

from pathlib import Path

import pytest

from e2egen.runner.arithmetic import lookup
from e2egen.runner.arithmetic.model import Arithmetic, CellKey
from e2egen.runner.arithmetic.profile import DeviceKey, ProfileError, find_profiles, read_profile, record_in_cache

KEY = DeviceKey.of("cpu", "torch", {"torch": "0.0"})
DAMAGED = {"not toml": 'device = "cpu"\nimpl = [', "bad finding": (
    'device = "cpu"\nimpl = "torch"\n[versions]\ntorch = "0.0"\n[cells."gemm/fwd/f32/nn"]\ninputs = "bogus"\n')}


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
    path = Path(tmp_path) / KEY.file_name
    path.write_text(DAMAGED["not toml"], encoding="utf-8")
    assert find_profiles(KEY) == []  # the shipped profiles are for other versions; the damaged cache is skipped
    cell = CellKey("gemm", "fwd", "f32", "nn")
    record_in_cache(KEY, cell, Arithmetic(acc_bits=11))
    assert read_profile(path).get(cell).acc_bits == 11


def test_an_unchanged_cache_is_parsed_once_and_a_rewrite_is_seen(tmp_path, monkeypatch):
    from e2egen.runner.arithmetic import profile as profiles

    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path))
    lookup.forget()
    first, second = CellKey("gemm", "fwd", "f32", "nn"), CellKey("gemm", "fwd", "f32", "tt")
    record_in_cache(KEY, first, Arithmetic(acc_bits=24))
    parsed = []
    original = profiles.Profile.from_toml
    monkeypatch.setattr(profiles.Profile, "from_toml", staticmethod(lambda *a: parsed.append(1) or original(*a)))
    for _ in range(5):
        assert find_profiles(KEY)[0].get(first).acc_bits == 24
    assert len(parsed) == 1
    record_in_cache(KEY, second, Arithmetic(acc_bits=11))  # another worker adds a cell: a new file
    assert find_profiles(KEY)[0].get(second).acc_bits == 11
