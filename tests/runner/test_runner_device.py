"""Device selection, capability skips, numeric modes, and timing."""
from __future__ import annotations

import pytest
import torch

from e2egen.runner import Skip, TimingOptions, make_problem, run, select_device
from e2egen.runner.device import require_dtype, tf32_mode
from e2egen.runner.timing import KernelTiming, _aim

GEMM = {"m": 8, "n": 8, "k": 8}
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")


def gemm(dtype="f32", **params):
    return make_problem("gemm", "fwd", dtype, "nn", {**GEMM, **params}, (-1.0, 1.0), 0)


def test_default_device_is_cuda_when_available(monkeypatch):
    monkeypatch.delenv("E2E_DEVICE", raising=False)
    assert select_device().type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_name_and_environment_override(monkeypatch):
    monkeypatch.setenv("E2E_DEVICE", "cpu")
    assert select_device() == torch.device("cpu")
    assert select_device("cpu") == torch.device("cpu")
    assert select_device(torch.device("cpu")) == torch.device("cpu")
    assert run(gemm()).device == "cpu"


@pytest.mark.parametrize("name", ["tpu", "CPU", "cuda:x", "gpu"])
def test_unknown_device_names_are_value_errors_listing_choices(name, monkeypatch):
    monkeypatch.delenv("E2E_DEVICE", raising=False)
    with pytest.raises(ValueError, match="valid: cpu, cuda, cuda:N"):
        select_device(name)
    monkeypatch.setenv("E2E_DEVICE", name)
    with pytest.raises(ValueError, match="E2E_DEVICE"):
        select_device()


@no_cuda
@pytest.mark.parametrize("name", ["cuda", "cuda:0"])
def test_cuda_asked_for_without_cuda_is_an_error_unless_allowed(name, monkeypatch):
    from e2egen.runner.device import DeviceError

    with pytest.raises(DeviceError, match="E2E_ALLOW_MISSING_DEVICE"):
        select_device(name)
    monkeypatch.setenv("E2E_DEVICE", name)
    with pytest.raises(DeviceError):
        run(gemm())
    monkeypatch.setenv("E2E_ALLOW_MISSING_DEVICE", "1")  # the user says skipping is fine
    with pytest.raises(Skip, match="CUDA is not available"):
        select_device(name)
    with pytest.raises(Skip):
        run(gemm())


def test_tf32_needs_a_tensor_core_gpu():
    with pytest.raises(Skip, match="tf32") as info:
        require_dtype(torch.device("cpu"), "tf32")
    assert "cpu has no tf32" in info.value.reason
    with pytest.raises(Skip, match="tf32"):
        run(gemm("tf32"), device="cpu")
    for dtype in ("f32", "f16", "bf16"):
        require_dtype(torch.device("cpu"), dtype)


def test_a_problem_too_large_for_memory_is_a_skip_before_any_allocation():
    huge = gemm("f16", m=2 ** 20, n=2 ** 20, k=2 ** 20)
    with pytest.raises(Skip, match="GiB"):
        run(huge, device="cpu")


def test_tf32_mode_sets_and_restores_the_switches():
    before = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    for enabled in (True, False):
        with tf32_mode(enabled):
            assert torch.backends.cudnn.allow_tf32 is enabled
            assert torch.backends.cuda.matmul.allow_tf32 is enabled
        assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == before
    with pytest.raises(RuntimeError), tf32_mode(not before[0]):
        raise RuntimeError("kernel crashed")
    assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == before


def test_fixed_repetitions():
    result = run(gemm(), timing=TimingOptions(warmup=1, reps=7))
    timing = result.kernel_timing
    assert isinstance(timing, KernelTiming) and timing.reps == 7 and timing.calls == 7
    assert 0 < timing.q1_s <= timing.median_s <= timing.q3_s
    assert timing.iqr_s == timing.q3_s - timing.q1_s
    assert timing.tflops == pytest.approx(gemm().flops / timing.median_s / 1e12)
    assert set(result.timings) == {"inputs", "kernel_first_call", "kernel", "reference"}
    assert result.timings["kernel"] == timing.median_s  # the warm, timed figure is the one recorded


def test_adaptive_repetitions():
    options = TimingOptions(warmup=0, min_time_s=0.05, sample_time_s=0.005, min_samples=3)
    timing = run(gemm(), timing=options).kernel_timing
    assert timing.reps >= 3 and timing.calls >= timing.reps


def test_calls_per_sample_aim_at_the_sample_time():
    assert _aim(calls=4, elapsed=0.02, target=0.01) == 2  # too long: fewer calls
    assert _aim(calls=4, elapsed=0.005, target=0.01) == 8  # too short: more
    assert _aim(calls=1, elapsed=1e-7, target=0.01) == 10  # at most 10x per step
    assert _aim(calls=1, elapsed=1.0, target=0.01) == 1  # never below one call


def test_no_timing_by_default():
    assert run(gemm()).kernel_timing is None


@pytest.mark.parametrize("kwargs", [{"warmup": -1}, {"reps": 0}, {"min_time_s": 0}, {"min_samples": 5, "max_samples": 2}])
def test_timing_options_are_validated(kwargs):
    with pytest.raises(ValueError):
        TimingOptions(**kwargs)
