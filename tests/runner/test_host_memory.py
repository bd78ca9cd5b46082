"""Freed host memory kept for reuse (runner/host_memory.py): large tensors freed by one case stay in the
process's heap for the next, within the cap, and the memory check counts them as available."""
from __future__ import annotations

import subprocess
import sys

import pytest

from e2egen.runner import host_memory
from e2egen.runner.device import _available_host_memory, free_memory

pytestmark = pytest.mark.skipif(host_memory._glibc() is None, reason="glibc's malloc settings only")

PROBE = """
import os, torch
from e2egen.runner import host_memory
took = host_memory.retain_freed_memory()
block = torch.ones(200 << 20, dtype=torch.uint8)  # 200 MiB, above glibc's default mmap threshold
del block
print(took, host_memory.reusable_bytes())
"""


def _probe(env_extra: dict[str, str]) -> tuple[bool, int]:
    import os

    env = {**os.environ, **env_extra}
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    took, reusable = result.stdout.split()
    return took == "True", int(reusable)


def test_a_freed_large_tensor_stays_in_the_heap_for_reuse():
    took, reusable = _probe({"E2EGEN_RETAIN_HEAP": "1"})
    assert took and reusable >= 200 << 20


def test_without_retention_it_goes_back_to_the_kernel():
    took, reusable = _probe({"E2EGEN_RETAIN_HEAP": "0"})
    assert not took and reusable < 64 << 20


def test_the_cap_is_shared_among_test_workers(monkeypatch):
    caps = []
    for workers in ("1", "2", "8", "64", "1000000"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", workers)
        caps.append(host_memory.retention_cap())
    assert caps == sorted(caps, reverse=True) and caps[0] > caps[-1]
    assert caps[0] <= (1 << 31) - 1 and caps[-1] == 64 << 20  # mallopt's int at most; never below 64 MiB


def test_the_memory_check_counts_the_reusable_heap():
    import torch

    host_memory.retain_freed_memory()
    block = torch.ones(300 << 20, dtype=torch.uint8)
    del block
    reusable = host_memory.reusable_bytes()
    counted, system = free_memory(torch.device("cpu")), _available_host_memory()
    assert reusable >= 300 << 20
    assert counted - system >= 200 << 20  # MemAvailable alone does not see the freed block
