"""What a generated suite was made from, and whether it still matches it.

`gen` reads two files that decide the cases: the catalogue and the PR
selection it names (`pr_selection`). manifest.json records the catalogue's
path relative to the suite's directory (so the suite finds it from any
working directory, and the same catalogue gives the same bytes wherever
`gen` ran) and the SHA-256 of both files. A suite whose files no longer
match, or whose catalogue is gone, is stale: running it would judge kernels
by settings the catalogue no longer holds, so it is refused with the command
that regenerates it.

Standard library only: the generated suite's collection imports it.
"""
from __future__ import annotations

import hashlib
import os
import shlex
from pathlib import Path
from typing import Any, Mapping

CATALOGUE_DIGEST = "catalogue_sha256"
SELECTION_DIGEST = "pr_selection_sha256"


def file_digest(path: str | os.PathLike) -> str | None:
    """SHA-256 of the file's bytes; None when there is no file to read (absent, a directory, unreadable)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def selection_path(catalogue: str | os.PathLike, pr_selection: str | None) -> Path | None:
    """The PR selection file a catalogue names (relative to the catalogue), or None when it names none."""
    return Path(catalogue).parent / pr_selection if pr_selection else None


def source_digests(catalogue: str | os.PathLike, pr_selection: str | None) -> dict[str, str | None]:
    """The digests manifest.json records: the catalogue's, and the PR selection's (None: named but not written yet)."""
    selection = selection_path(catalogue, pr_selection)
    return {CATALOGUE_DIGEST: file_digest(catalogue),
            SELECTION_DIGEST: file_digest(selection) if selection is not None else None}


def path_from_suite(catalogue: str | os.PathLike, suite_dir: str | os.PathLike) -> str:
    """The catalogue's path as the suite records it: relative to the suite's directory, '/'-separated
    (absolute only where no relative path exists, such as another drive)."""
    catalogue, suite_dir = os.path.abspath(catalogue), os.path.abspath(suite_dir)
    try:
        return Path(os.path.relpath(catalogue, suite_dir)).as_posix()
    except ValueError:
        return Path(catalogue).as_posix()


def catalogue_of_suite(recorded: str | None, suite_dir: str | os.PathLike) -> Path | None:
    """The absolute path of the catalogue a suite records (relative to the suite's directory), or None."""
    if not recorded:
        return None
    return Path(os.path.normpath(Path(suite_dir).absolute() / recorded))


def stale_problem(manifest: Mapping[str, Any], suite_dir: str | os.PathLike) -> str | None:
    """Why the suite in `suite_dir` (its manifest.json given) must not run as it is, or None when it is current."""
    suite_dir = Path(suite_dir).absolute()
    catalogue = catalogue_of_suite(manifest.get("catalogue"), suite_dir)
    digests = manifest.get("sources")
    out = shlex.quote(str(suite_dir))
    if catalogue is None or not isinstance(digests, Mapping):
        return (f"the generated suite {suite_dir} was written by an older e2egen that did not record what it was "
                f"generated from; regenerate it: `make gen`, or `e2egen gen CATALOGUE --out {out}`")
    regenerate = f"regenerate it: `make gen`, or `e2egen gen {shlex.quote(str(catalogue))} --out {out}`"
    if not catalogue.is_file():
        return (f"the generated suite {suite_dir} was generated from the catalogue {catalogue}, which is not there "
                f"any more (moved or deleted); regenerate the suite from where the catalogue is now: "
                f"`e2egen gen NEW/PATH.toml --out {out}`, or delete {suite_dir}")
    current = source_digests(catalogue, manifest.get("pr_selection"))
    if current[CATALOGUE_DIGEST] != digests.get(CATALOGUE_DIGEST):
        return (f"the generated suite {suite_dir} is stale: its catalogue {catalogue} changed since it was "
                f"generated, so its cases, tolerances and seeds may not be the catalogue's; {regenerate}")
    if current[SELECTION_DIGEST] != digests.get(SELECTION_DIGEST):
        selection = selection_path(catalogue, manifest.get("pr_selection"))
        return (f"the generated suite {suite_dir} is stale: the PR selection {selection} (named by {catalogue}) "
                f"changed since it was generated, so its `pr` markers may be wrong; {regenerate}")
    return None
