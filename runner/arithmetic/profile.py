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
import functools
import hashlib
import os
import re
import sys
import threading
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from e2egen.errors import UserError
from e2egen.files import write_text_atomically

from e2egen.runner.arithmetic.model import Arithmetic, CellKey

PROFILES_ENV = "E2EGEN_PROFILES"
SHIPPED_PACKAGE = "e2egen.runner.arithmetic"
SHIPPED_DIR = "profiles"
HEADER = ("# e2egen arithmetic profile: what the probes measured for one kernel on one device.\n"
          "# Written by `e2egen arithmetic`; README \"Arithmetic profiles\" explains every key.\n")


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
            if not isinstance(data.get(key), str):
                raise ValueError(f"{where}: `{key}` must be a string")
        versions = {str(k): str(v) for k, v in data.get("versions", {}).items()}
        cells = {}
        for name, table in data.get("cells", {}).items():
            try:
                CellKey.parse(name)
                cells[name] = Arithmetic.from_table(table)
            except (TypeError, ValueError) as err:
                raise ValueError(f"{where}: cells.{name}: {err}") from err
        return cls(DeviceKey.of(data["device"], data["impl"], versions), cells, path, shipped)

    def write(self, path: Path) -> Path:
        """Atomically (e2egen.files: a temporary file renamed over the target), so concurrent workers never see
        half a file; OutputError (also an OSError) naming the file when it cannot be written (disk full, ...)."""
        write_text_atomically(path, self.to_toml())
        self.path = path
        return path


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
    """A profile file that cannot be read: not TOML, or keys and values the findings do not have."""


def read_profile(path: Path) -> Profile | None:
    """The profile at `path` (None when there is none); ProfileError naming the file when it is damaged."""
    import tomllib

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise ProfileError(f"cannot read the arithmetic profile: {err}", where=str(path)) from None
    try:
        return Profile.from_toml(text, path)
    except (tomllib.TOMLDecodeError, ValueError, TypeError) as err:
        raise ProfileError(f"damaged arithmetic profile ({err}); delete it or write it again with "
                           f"`e2egen arithmetic`", where=str(path)) from None


def matches(profile: Profile, key: DeviceKey) -> bool:
    return profile.key == key


_lock = threading.Lock()


@functools.lru_cache(maxsize=None)
def _shipped() -> tuple[Profile, ...]:
    return tuple(shipped_profiles())


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


def find_profiles(key: DeviceKey) -> list[Profile]:
    """The cached profile (first) and the shipped ones for this device, impl and versions (read-only:
    the cached one may be shared with earlier calls)."""
    found = []
    try:
        cached = _read_if_changed(cache_dir() / key.cache_file_name)
    except ProfileError as err:  # a run does not stop for a damaged cache: it probes again and rewrites the file
        _warn_once(err)
        cached = None
    if cached is not None and matches(cached, key):
        found.append(cached)
    found += [p for p in _shipped() if matches(p, key)]
    return found


_warned: set[str] = set()


def _warn_once(err: ProfileError) -> None:
    """Say so (once per file and process) when the cache is damaged: its cells are lost."""
    text = str(err)
    if text in _warned:
        return
    _warned.add(text)
    message = f"{text}; runs probe the cells it held again, and the first cell probed rewrites it"
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
        handle = open(path.with_name(path.name + ".lock"), "a")
    except (ImportError, OSError):
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:
            pass
        yield  # the lock goes with the file's closing


def record_in_cache(key: DeviceKey, cell: CellKey, arithmetic: Arithmetic) -> Path:
    """Add one cell to the cached profile (re-read first: another worker may have added cells)."""
    path = cache_dir() / key.cache_file_name
    with _lock, other_writers_excluded(path):
        try:
            profile = read_profile(path)
        except ProfileError:
            profile = None
        if profile is None or not matches(profile, key):
            profile = Profile(key)
        profile.cells[str(cell)] = arithmetic
        return profile.write(path)


def describe_key(key: DeviceKey) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in key.versions if v)
    return f"{key.impl} on {key.device}" + (f" ({versions})" if versions else "")


def as_mapping(profile: Profile) -> dict[str, Any]:
    """The JSON form a nightly record keeps."""
    return {"device": profile.key.device, "impl": profile.key.impl, "versions": dict(profile.key.versions),
            "cells": {name: a.to_table() for name, a in sorted(profile.cells.items())}}
