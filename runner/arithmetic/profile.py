"""Arithmetic profiles: the probes' findings for one kernel on one device, as TOML.

A profile is keyed by the device (its name, and for the CPU the instruction
set torch dispatches to) and the impl, and records the software versions
that decide the arithmetic (torch, CUDA, cuDNN). It is found, in order, in
the cache directory ($E2EGEN_PROFILES, else ~/.cache/e2egen/profiles) and
among the profiles shipped with e2egen; a profile whose versions differ from
this machine's is not used. A run that needs a cell no profile holds probes
it once and adds it to the cached profile (`cells_probed_now` says which). The cache keeps one file
per device, impl and set of versions (DeviceKey.cache_file_name).
"""
from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import re
import stat
import sys
import threading
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from e2egen.errors import UserError
from e2egen.files import open_appending, write_text_atomically

from e2egen.runner.arithmetic.model import Arithmetic, CellKey

PROFILES_ENV = "E2EGEN_PROFILES"
SHIPPED_PACKAGE = "e2egen.runner.arithmetic"
SHIPPED_DIR = "profiles"
HEADER = ("# e2egen arithmetic profile: what the probes measured for one kernel on one device.\n"
          "# Written by `e2egen arithmetic`; docs/concepts/arithmetic-profiles.md explains every key.\n")


@dataclass(frozen=True)
class DeviceKey:
    device: str  # "cpu" or the GPU's name
    impl: str
    versions: tuple[tuple[str, str], ...] = ()  # sorted (name, version): torch, cuda, cudnn, cpu_capability, probes

    @classmethod
    def of(cls, device: str, impl: str, versions: Mapping[str, str]) -> "DeviceKey":
        return cls(device, impl, tuple(sorted((str(k), str(v)) for k, v in versions.items())))

    @property
    def file_name(self) -> str:
        """The file a profile of this device and impl is written to (`e2egen arithmetic --out`, the shipped ones):
        on the CPU it names the code paths too (runner.kernel_paths), so each path's profile ships beside the others."""
        versions = dict(self.versions)
        paths = [versions["cpu_capability"]] if "cpu_capability" in versions else []
        if "onednn" in versions:
            paths.append(f"onednn-{versions['onednn']}")
        slug = re.sub(r"[^A-Za-z0-9]+", "-", "--".join([self.device, self.impl, *paths])).strip("-").lower()
        return f"{slug}.toml"

    @property
    def cache_file_name(self) -> str:
        """The cache's file for this key: file_name with a digest of the versions, so that environments with
        other torch or probe versions sharing one cache directory keep a file each, instead of replacing each
        other's (and probing again) at every switch."""
        digest = hashlib.sha256(repr(self.versions).encode()).hexdigest()[:12]
        return f"{self.file_name.removesuffix('.toml')}--{digest}.toml"


@dataclass
class Profile:
    key: DeviceKey
    cells: dict[str, Arithmetic] = field(default_factory=dict)  # str(CellKey) -> findings
    path: Path | None = None  # where it was read from or written to
    shipped: bool = False
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (entry, why) of the cells dropped on reading

    def get(self, cell: CellKey) -> Arithmetic | None:
        return self.cells.get(str(cell))

    def to_toml(self) -> str:
        import tomlkit

        document = tomlkit.document()
        document.add(tomlkit.comment(HEADER.splitlines()[0][2:]))
        document.add(tomlkit.comment(HEADER.splitlines()[1][2:]))
        document["device"] = self.key.device
        document["impl"] = self.key.impl
        document["versions"] = dict(self.key.versions)
        cells = tomlkit.table(is_super_table=True)
        for name in sorted(self.cells):
            cells[name] = self.cells[name].to_table()
        document["cells"] = cells
        return tomlkit.dumps(document)

    @classmethod
    def from_toml(cls, text: str, path: Path | None = None, shipped: bool = False) -> "Profile":
        import tomllib

        data = tomllib.loads(text)
        where = str(path) if path else "profile"
        for key in ("device", "impl"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise ValueError(f"{where}: `{key}` must be a non-empty string")
        versions, cells_table = data.get("versions", {}), data.get("cells", {})
        if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
            raise ValueError(f"{where}: `versions` must be a table of strings")
        if not isinstance(cells_table, dict):
            raise ValueError(f"{where}: `cells` must be a table of cells")
        cells, rejected = {}, []
        for name, table in cells_table.items():  # each entry checked like a catalogue's: a bad one is dropped (probed again)
            try:
                cells[name] = checked_entry(name, table)
            except (TypeError, ValueError) as err:
                rejected.append((name, str(err)))
        return cls(DeviceKey.of(data["device"], data["impl"], versions), cells, path, shipped, rejected)

    def write(self, path: Path) -> Path:
        """Atomically (e2egen.files: a temporary file renamed over the target), so concurrent workers never see
        half a file; OutputError (also an OSError) naming the file when it cannot be written (disk full, ...)."""
        write_text_atomically(path, self.to_toml())
        self.path = path
        return path


def checked_entry(name: str, table: Any) -> Arithmetic:
    """The findings of one profile entry, or ValueError saying what is wrong with it: the cell's name must parse
    (op/direction/dtype/layout[/shape class]), every finding have its type and range (Arithmetic's checks), and
    `unexplained` be empty: outcomes no arithmetic explains are a kernel's bug, never cached (lookup.py)."""
    if len(name) > 1000:
        raise ValueError(f"a cell's name is at most 1000 characters, got {len(name)}")
    CellKey.parse(name)
    findings = Arithmetic.from_table(table)
    if findings.unexplained:
        raise ValueError(f"unexplained = {list(findings.unexplained)[:2]!r}; valid: [] (findings with unexplained "
                         f"outcomes are never kept in a profile: the cell is probed again)")
    return findings


def cache_dir() -> Path:
    configured = os.environ.get(PROFILES_ENV, "").strip()
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "e2egen" / "profiles"


def shipped_profiles() -> list[Profile]:
    folder = resources.files(SHIPPED_PACKAGE) / SHIPPED_DIR
    profiles = []
    if folder.is_dir():
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".toml"):
                profiles.append(Profile.from_toml(entry.read_text(encoding="utf-8"), Path(str(entry)), shipped=True))
    return profiles


class ProfileError(UserError):
    """A profile file that cannot be read: not TOML, or keys and values the findings do not have.
    `unreadable`: the file could not be read at all (a directory, no permission), as opposed to damaged."""

    unreadable = False


# The largest profile read: the shipped ones hold a few hundred cells in ~100 KB. A cache grown past this (or a
# link to /dev/zero) is started afresh instead of being read and rewritten whole for every new cell.
PROFILE_MAX_BYTES = 8 << 20


def read_profile(path: Path) -> Profile | None:
    """The profile at `path` (None when there is none); ProfileError naming the file when it is damaged (or too
    large: it is then written afresh), `unreadable` when it cannot be read at all (not a regular file: a pipe
    would block the run, a device would never end)."""
    import tomllib

    try:
        status = path.stat()
        if not stat.S_ISREG(status.st_mode):
            raise IsADirectoryError(errno.EISDIR, "not a regular file") if stat.S_ISDIR(status.st_mode) else \
                OSError(errno.EINVAL, "not a regular file (a pipe, device or socket)")
        too_large = status.st_size > PROFILE_MAX_BYTES
        text = "" if too_large else path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        error = ProfileError(f"cannot read the arithmetic profile: {err}", where=str(path))
        error.unreadable = isinstance(err, OSError)
        raise error from None
    if too_large:
        raise ProfileError(f"the arithmetic profile holds {status.st_size / 2**20:.0f} MiB, more than the "
                           f"{PROFILE_MAX_BYTES >> 20} MiB a profile may; it is started afresh", where=str(path))
    try:
        return Profile.from_toml(text, path)
    except (tomllib.TOMLDecodeError, ValueError, TypeError, RecursionError, MemoryError) as err:
        what = "nested too deeply to read" if isinstance(err, RecursionError) else str(err)
        raise ProfileError(f"damaged arithmetic profile ({what}); delete it or write it again with "
                           f"`e2egen arithmetic`", where=str(path)) from None


def matches(profile: Profile, key: DeviceKey) -> bool:
    return profile.key == key


_lock = threading.Lock()


@functools.lru_cache(maxsize=None)
def _shipped() -> tuple[Profile, ...]:
    try:
        return tuple(shipped_profiles())
    except (OSError, UnicodeDecodeError, ValueError, TypeError) as err:  # tomllib's error is a ValueError
        _warn_once(("shipped",), f"the shipped arithmetic profiles cannot be read ({err}); runs probe every cell")
        return ()


_parsed: dict[Path, tuple[tuple[int, int, int], "Profile | ProfileError | None"]] = {}


def _read_if_changed(path: Path) -> Profile | None:
    """read_profile, parsed again only when the file changed (profiles are written atomically: a new
    inode each time), so a run does not parse its cached profile, nor fail to, for every case."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    except OSError:
        return read_profile(path)  # its error names the file
    stamp = (status.st_ino, status.st_mtime_ns, status.st_size)
    seen = _parsed.get(path)
    if seen is None or seen[0] != stamp:
        try:
            seen = (stamp, read_profile(path))
        except ProfileError as err:
            seen = (stamp, err)
        _parsed[path] = seen
    if isinstance(seen[1], ProfileError):
        raise seen[1]
    return seen[1]


def forget_parsed_profiles() -> None:
    _parsed.clear()
    _warned.clear()


def find_profiles(key: DeviceKey) -> list[Profile]:
    """The cached profile (first) and the shipped ones for this device, impl and versions (read-only:
    the cached one may be shared with earlier calls)."""
    found = []
    try:
        cached = _read_if_changed(cache_dir() / key.cache_file_name)
    except ProfileError as err:  # a run does not stop for a damaged cache: it probes again and rewrites the file
        if err.unreadable:  # a directory, no permission, E2EGEN_PROFILES naming a file: runs go on without it
            _warn_once(("unusable", err.where), f"{err}; runs go on without the cache, probing the cells they need "
                                                f"(and caching none where it cannot be written either)")
        else:
            _warn_once(("damaged", err.where), f"{err}; runs probe the cells it held again, and the first cell "
                                               f"probed rewrites it")
        cached = None
    if cached is not None and matches(cached, key):
        found.append(cached)
    found += [p for p in _shipped() if matches(p, key)]
    for profile in found:
        _warn_of_rejected(profile)
    return found


def _warn_of_rejected(profile: Profile) -> None:
    """One warning per profile file naming each entry dropped on reading (its cell is probed again)."""
    if not profile.rejected:
        return
    entries = "; ".join(f"cells.\"{name[:200]}\": {why}" for name, why in profile.rejected[:5])
    more = f" (and {len(profile.rejected) - 5} more)" if len(profile.rejected) > 5 else ""
    what = "shipped arithmetic profile" if profile.shipped else "arithmetic-profile cache"
    _warn_once(("rejected", str(profile.path), tuple(profile.rejected)),
               f"{profile.path}: {what}: entry not used, its cell is probed again: {entries}{more}")


_warned: set[tuple] = set()


def _warn_once(key: tuple, message: str) -> None:
    """Say `message` once per process for `key` (a file and what is wrong with it): a run goes on regardless."""
    if key in _warned:
        return
    _warned.add(key)
    try:
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    except RuntimeWarning:  # warnings made errors (-W error): the run still goes on, and says so
        print(f"warning: {message}", file=sys.stderr)


@contextlib.contextmanager
def other_writers_excluded(path: Path):
    """An advisory lock on `path`.lock while a process reads, adds to and rewrites the profile: xdist
    workers probing at once would otherwise each write back what they read, dropping the others' new cells.
    Where the lock cannot be had (no fcntl, a read-only folder) the write goes ahead unlocked: a lost cell is
    only probed again."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open_appending(path.with_name(path.name + ".lock"), os.O_WRONLY | os.O_APPEND)
    except (ImportError, OSError):  # OutputError (a link at the lock's path) included
        yield
        return
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(lock)  # the lock goes with the file's closing


def record_in_cache(key: DeviceKey, cell: CellKey, arithmetic: Arithmetic) -> Path | None:
    """Add one cell to the cached profile (re-read first: another worker may have added cells; entries that fail
    checked_entry are dropped). None, with one warning per cache file and process, when the cache cannot be
    written (a directory in the way, E2EGEN_PROFILES naming a file, a read-only or full disk): the run goes on,
    probing the cells it needs without caching them."""
    path = cache_dir() / key.cache_file_name
    try:
        checked_entry(str(cell), arithmetic.to_table())  # never write what would be refused on reading
    except ValueError as err:
        _warn_once(("unfit", str(cell)), f"{path}: findings of {cell} not cached ({err})")
        return None
    try:
        with _lock, other_writers_excluded(path):
            try:
                profile = read_profile(path)
            except ProfileError:
                profile = None
            if profile is None or not matches(profile, key):
                profile = Profile(key)
            profile.cells[str(cell)] = arithmetic
            return profile.write(path)
    except (OSError, UserError) as err:  # OutputError is both
        _warn_once(("unusable", str(path)), f"{path}: cannot write the arithmetic-profile cache ({err}); runs go on "
                                         f"probing the cells they need, without caching them")
        return None


def describe_key(key: DeviceKey) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in key.versions if v)
    return f"{key.impl} on {key.device}" + (f" ({versions})" if versions else "")


def as_mapping(profile: Profile) -> dict[str, Any]:
    """The JSON form a nightly record keeps."""
    return {"device": profile.key.device, "impl": profile.key.impl, "versions": dict(profile.key.versions),
            "cells": {name: a.to_table() for name, a in sorted(profile.cells.items())}}
