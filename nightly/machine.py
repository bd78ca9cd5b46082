"""What a run ran on and from: the machine, torch/CUDA/cuDNN versions, the catalogue's git revision.

Every function here is read-only. `versions()` does not initialise CUDA;
`visible_gpus()`, `gpu_names()` and `describe_machine()` do, so they run in the
sweep and the xdist controller, never in a worker before it is pinned to its
GPU (CUDA_VISIBLE_DEVICES only takes effect before CUDA is initialised).
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import subprocess
from functools import lru_cache
from pathlib import Path

from e2egen.generator.sources import file_digest


def utc_now() -> str:
    """ISO 8601 UTC with seconds, e.g. 2025-01-14T03:12:09Z: sorts as text, which the store relies on."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def date_seed(today: _dt.date | None = None) -> int:
    """The default global seed of a nightly run: the UTC date as YYYYMMDD.

    Fresh inputs every night, yet anyone can rebuild the same inputs from the
    date alone; reruns on the same day see the same inputs.
    """
    today = today or _dt.datetime.now(_dt.timezone.utc).date()
    return today.year * 10000 + today.month * 100 + today.day


@lru_cache(maxsize=1)
def versions() -> dict[str, str | None]:
    """torch, CUDA and cuDNN versions (None where the build has none)."""
    import torch

    cudnn = None
    try:
        if torch.backends.cudnn.is_available():
            cudnn = str(torch.backends.cudnn.version())
    except Exception:  # a broken cuDNN install must not stop the recording
        cudnn = None
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None), "cudnn": cudnn}


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (indices or UUIDs).

    Worker pinning hands out these entries, so a sweep started under
    CUDA_VISIBLE_DEVICES=2,3 pins its workers to GPUs 2 and 3, not 0 and 1.
    """
    import torch

    if not torch.cuda.is_available():
        return []
    count = torch.cuda.device_count()
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        entries = [e.strip() for e in listed.split(",") if e.strip()]
        return entries[:count]
    return [str(i) for i in range(count)]


def gpu_names() -> list[str]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def describe_machine() -> dict:
    """The machine as the store keeps it (JSON-able)."""
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "gpus": gpu_names(),
        **versions(),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()




def git_revision(path: str | Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the git checkout holding `path`; (None, None) outside git.

    dirty: the file differs from that commit, so the revision alone does not
    say which catalogue ran (the catalogue's sha256 is recorded too).
    """
    path = Path(path).resolve()
    where = path.parent if path.is_file() or not path.exists() else path
    if not where.is_dir():
        return None, None
    try:
        commit = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if commit.returncode != 0:
            return None, None
        status = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--", str(path)],
                                capture_output=True, text=True, timeout=10)
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
        return commit.stdout.strip(), dirty
    except (OSError, subprocess.SubprocessError):
        return None, None


def catalogue_metadata(catalogue: str | Path | None) -> dict:
    """catalogue path, its sha256 and git revision, for a run's header."""
    if not catalogue:
        return {"catalogue": None, "catalogue_sha256": None, "git_revision": None, "git_dirty": None}
    revision, dirty = git_revision(catalogue)
    return {"catalogue": str(catalogue), "catalogue_sha256": file_digest(catalogue), "git_revision": revision, "git_dirty": dirty}
