"""Issue 46: a profile cache is input, checked like a catalogue; a cache that cannot be used or written never
fails a case; a kernel that changes global state while probed never teaches the cache.

Every entry of a cached (or shipped) profile is checked (Profile.from_toml -> checked_entry -> Arithmetic's
checks): a bad one is dropped, named in one warning with its file, and its cell probed again. A cache that
cannot be read or written (a directory in the way, E2EGEN_PROFILES naming a file, a read-only or full disk)
gives one warning; the run probes without caching. Findings are cached only when the probes ran, start to end,
without flush-to-zero and with float32 as the default dtype (lookup.unclean_start, and what runner.isolation notes a kernel changed)."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from e2egen.runner import make_problem
from e2egen.runner.arithmetic import lookup
from e2egen.runner.arithmetic.model import Arithmetic
from e2egen.runner.arithmetic.profile import Profile, find_profiles, read_profile, shipped_profiles
from e2egen.runner.kernels import resolve_impl

CPU = torch.device("cpu")
IMPL = "tests_profile_cache.plugin:gemm"  # a label: the digest of a module that does not exist is ""
CELL = "gemm/fwd/f32/nn"
GOOD = Arithmetic(probed_with="planted").to_table()


def problem():
    return make_problem("gemm", "fwd", "f32", "nn", {"m": 8, "n": 12, "k": 40}, (-1.0, 1.0), 3)


def measure(kernel=None):
    return lookup.measured_arithmetic(problem(), kernel or resolve_impl("gemm", "fwd"), CPU, IMPL)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("E2EGEN_PROFILES", str(tmp_path / "profiles"))
    lookup.forget()
    yield tmp_path / "profiles"
    lookup.forget()


def key():
    return lookup.device_key(CPU, IMPL)


def cache_file(directory: Path) -> Path:
    return directory / key().cache_file_name


def plant(directory: Path, cells: dict[str, object]) -> Path:
    profile = Profile(key())
    text = profile.to_toml()
    import tomlkit

    document = tomlkit.parse(text)
    document["cells"] = tomlkit.table(is_super_table=True)
    for name, table in cells.items():
        document["cells"][name] = table
    path = cache_file(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(document), encoding="utf-8")
    return path


# -- 1. every entry checked; a bad one dropped, named, probed again ---------------------------------------
BAD_FINDINGS = {
    "acc_bits negative": {"acc_bits": -3}, "acc_bits absurd": {"acc_bits": 1000}, "acc_bits zero": {"acc_bits": 0},
    "acc_bits a string": {"acc_bits": "24"}, "acc_bits a float": {"acc_bits": 24.5},
    "acc_bits a bool": {"acc_bits": True}, "acc_bits a list": {"acc_bits": [24]},
    "acc_bits_exact not bool": {"acc_bits_exact": "yes"}, "reversed not bool": {"reversed": 1},
    "inner_bits without groups": {"inner_bits": 7}, "inner_bits absurd": {"groups": "taps", "inner_bits": 500},
    "inner_bits missing in groups": {"groups": "taps", "inner_bits": 0},
    "chunks without a size": {"groups": "chunks", "inner_bits": 24},
    "a size without chunks": {"group_size": 32}, "group_size negative": {"groups": "chunks", "group_size": -4, "inner_bits": 24},
    "group_size absurd": {"groups": "chunks", "group_size": 10 ** 30, "inner_bits": 24},
    "inputs outside the set": {"inputs": "f128"}, "rounding outside the set": {"rounding": "stochastic"},
    "groups outside the set": {"groups": "rows"}, "subnormals outside the set": {"subnormal_inputs": "maybe"},
    "partials outside the set": {"partials": 3}, "intermediate outside the set": {"intermediate": "f8"},
    "compute outside the set": {"compute": "f1024"}, "special_values not text": {"special_values": 5},
    "special_values empty": {"special_values": ""}, "notes not text": {"notes": [1, 2]},
    "notes a string": {"notes": "abc"}, "unexplained a string": {"unexplained": "abc"},
    "unexplained not empty": {"unexplained": ["a dropped product"]}, "unknown key": {"acc_bitz": 24},
}


@pytest.mark.parametrize("kind", sorted(BAD_FINDINGS))
def test_a_bad_finding_is_refused_naming_the_field(kind):
    from e2egen.runner.arithmetic.profile import checked_entry

    with pytest.raises(ValueError) as info:
        checked_entry(CELL, {**GOOD, **BAD_FINDINGS[kind]})
    field = next(iter(BAD_FINDINGS[kind]))
    assert field in str(info.value) or "group" in str(info.value) or "inner_bits" in str(info.value)
    assert "valid" in str(info.value)


BAD_NAMES = ["nonsense", "gemm/fwd", "gemm//f32/nn", "/fwd/f32/nn", "gemm/fwd/f32/" + "x" * 2000]


@pytest.mark.parametrize("name", BAD_NAMES, ids=["one-part", "two-parts", "empty-part", "leading-slash", "huge"])
def test_a_garbage_cell_name_is_dropped_and_named(cache, name):
    path = plant(cache, {name: GOOD, "gemm/fwd/f32/tn": GOOD})
    with pytest.warns(RuntimeWarning) as seen:
        (profile,) = find_profiles(key())
    assert set(profile.cells) == {"gemm/fwd/f32/tn"}
    messages = [str(w.message) for w in seen if "entry not used" in str(w.message)]
    assert len(messages) == 1 and str(path) in messages[0] and name[:40] in messages[0]


@pytest.mark.parametrize("kind", ["acc_bits negative", "acc_bits absurd", "acc_bits a string",
                                  "unexplained not empty", "notes a string", "chunks without a size"])
def test_a_bad_cached_entry_is_probed_again_never_trusted(cache, kind):
    """acc_bits = -3 made the bound 1.3e8 looser (any kernel passed); 1000 failed correct cases; "24" crashed."""
    path = plant(cache, {CELL: {**GOOD, **BAD_FINDINGS[kind]}, "gemm/fwd/f32/tn": GOOD})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        measured = measure()
    named = [str(w.message) for w in seen if "entry not used" in str(w.message)]
    assert len(named) == 1 and str(path) in named[0] and CELL in named[0]
    assert measured.probed_now and measured.origin == f"probed now, cached in {path}"
    assert measured.arithmetic.acc_bits == 24 and not measured.arithmetic.unexplained  # torch's f32 gemm
    rewritten = read_profile(path)
    assert rewritten.rejected == [] and rewritten.get(measured.cell) == measured.arithmetic
    assert "gemm/fwd/f32/tn" in rewritten.cells  # the good entries stay
    lookup.forget()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rewritten cache is clean: no warning any more
        assert measure().origin == f"cached profile {path.name}"


def test_damage_of_the_whole_file_beyond_toml_is_a_warning_not_a_crash(cache):
    path = cache_file(cache)
    path.parent.mkdir(parents=True)
    for text in ('device = "cpu"\nimpl = "x"\nversions = 5\n', 'device = "cpu"\nimpl = "x"\ncells = 5\n',
                 'device = "cpu"\nimpl = "x"\n[versions]\ntorch = 2\n', 'device = 3\nimpl = "x"\n'):
        path.write_text(text, encoding="utf-8")
        lookup.forget()
        with pytest.warns(RuntimeWarning, match="damaged arithmetic profile"):
            measured = measure()
        assert measured.probed_now and measured.arithmetic.acc_bits == 24


@pytest.mark.parametrize("damage", ["nested 2000 deep", "inline tables nested", "too large"])
def test_damage_tomllib_cannot_survive_or_a_cache_too_large_is_started_afresh(cache, damage):
    """tomllib raises RecursionError past ~500 levels (every later case failed with it, the file never rewritten);
    a cache of 100,000 cells was read and rewritten whole for every new cell (30x slower runs)."""
    path = plant(cache, {})
    with open(path, "a", encoding="utf-8") as f:
        if damage == "nested 2000 deep":
            f.write("[junk]\nx = " + "[" * 2000 + "]" * 2000 + "\n")
        elif damage == "inline tables nested":
            f.write("[junk]\nx = " + "{a = " * 1500 + "1" + "}" * 1500 + "\n")
        else:
            f.write("#" * (9 << 20) + "\n")
    lookup.forget()
    with pytest.warns(RuntimeWarning, match="damaged arithmetic profile|started afresh"):
        measured = measure()
    assert measured.probed_now and measured.arithmetic.acc_bits == 24
    lookup.forget()
    assert read_profile(path).cells  # written afresh with the cell just probed
    assert path.stat().st_size < 1 << 20


@pytest.mark.parametrize("special", ["fifo", "link to /dev/zero"])
def test_a_cache_file_that_is_not_a_regular_file_is_never_read(cache, special):
    """A FIFO blocked the run forever; a link to /dev/zero read until memory ran out."""
    path = cache_file(cache)
    path.parent.mkdir(parents=True)
    if special == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        measured = measure()  # before: blocked (the fifo) or ran out of memory
    assert measured.probed_now and measured.arithmetic.acc_bits == 24
    messages = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    assert messages and "not a regular file" in messages[0], messages


def test_the_shipped_profiles_pass_the_same_checks():
    """A bad shipped entry would be dropped at run time, with a warning: here it is a test failure."""
    profiles = shipped_profiles()
    assert profiles
    for profile in profiles:
        assert profile.rejected == [], f"{profile.path}: {profile.rejected[:3]}"
        assert profile.cells


def test_a_bad_shipped_entry_is_dropped_by_the_same_code():
    text = Profile(key(), {CELL: Arithmetic()}).to_toml().replace("acc_bits = 24", "acc_bits = -3")
    profile = Profile.from_toml(text, Path("shipped.toml"), shipped=True)
    assert profile.cells == {} and profile.rejected[0][0] == CELL and "acc_bits = -3" in profile.rejected[0][1]


# -- 2. a cache that cannot be read or written: one warning, the run goes on ----------------------------------
def _runs_without_caching(expect_in_warning: str) -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        first = measure()
        lookup._memo.clear()  # the next case of the cell in a new process-like lookup: still one warning
        second = measure()
    assert first.probed_now and second.probed_now and first.arithmetic.acc_bits == 24
    assert "not cached" in first.origin, first.origin
    messages = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and expect_in_warning in messages[0], messages  # one warning, naming the file
    assert "cannot read" in messages[0] or "cannot write" in messages[0]


def test_a_directory_at_the_cache_path(cache):
    cache_file(cache).mkdir(parents=True)
    _runs_without_caching(str(cache_file(cache)))


def test_the_cache_variable_naming_a_file(tmp_path, monkeypatch):
    target = tmp_path / "a-file"
    target.write_text("not a directory\n", encoding="utf-8")
    monkeypatch.setenv("E2EGEN_PROFILES", str(target))
    lookup.forget()
    try:
        _runs_without_caching(str(target))
        assert target.read_text(encoding="utf-8") == "not a directory\n"
    finally:
        lookup.forget()


def test_a_read_only_cache_location(monkeypatch):
    """/proc refuses new files for every user, root included (chmod does not stop root)."""
    monkeypatch.setenv("E2EGEN_PROFILES", "/proc/e2egen-profiles")
    lookup.forget()
    try:
        _runs_without_caching("/proc/e2egen-profiles")
    finally:
        lookup.forget()


FULL_DISK = r"""
import os, resource, signal, sys, warnings
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
sys.path.insert(0, sys.argv[1])
from test_profile_cache_hardening import measure
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as seen:
    measured = measure()
assert measured.probed_now and "not cached" in measured.origin, measured.origin
runtime = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
assert len(runtime) == 1 and "cannot write" in runtime[0], runtime
print("ok")
"""


def test_a_full_cache_location(tmp_path):
    env = {**os.environ, "E2EGEN_PROFILES": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(Path(__file__).parent)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]
    assert not any(p.suffix == ".toml" and p.stat().st_size > 0 and read_profile(p).cells for p in tmp_path.iterdir())


# -- 3. a kernel that changes global state while probed does not teach the cache --------------------------------
def _flushing_kernel(*args, **kwargs):
    torch.set_flush_denormal(True)
    return resolve_impl("gemm", "fwd")(*args, **kwargs)


def test_findings_probed_while_a_kernel_turns_on_flush_to_zero_are_not_cached(cache):
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU has no flush-to-zero mode torch can set")
    try:
        measured = measure(_flushing_kernel)
    finally:
        torch.set_flush_denormal(False)
    assert "not cached" in measured.origin and "flush-to-zero" in measured.origin
    assert not cache_file(cache).exists()
    clean = measure()  # not remembered either: probed afresh, in the clean state, and cached
    assert clean.probed_now and clean.arithmetic.subnormal_outputs == "kept"
    assert clean.origin == f"probed now, cached in {cache_file(cache)}"


def test_findings_probed_under_flush_to_zero_leaked_from_before_are_not_cached(cache):
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero mode torch can set")
    try:
        measured = measure()
    finally:
        torch.set_flush_denormal(False)
    assert "not cached" in measured.origin and "flushes subnormals" in measured.origin
    assert not cache_file(cache).exists()


def test_findings_probed_with_another_default_dtype_are_not_cached(cache):
    def widening_kernel(*args, **kwargs):
        torch.set_default_dtype(torch.float64)
        return resolve_impl("gemm", "fwd")(*args, **kwargs)

    try:
        changed = measure(widening_kernel)  # the harness puts the dtype back after the call: the call saw float64
        lookup.forget()
        torch.set_default_dtype(torch.float64)  # leaked from before the probes (an earlier case, the caller)
        leaked = measure()
    finally:
        torch.set_default_dtype(torch.float32)
    assert "default dtype" in changed.origin and "not cached" in changed.origin
    assert "default dtype" in leaked.origin and "not cached" in leaked.origin
    assert not cache_file(cache).exists()
