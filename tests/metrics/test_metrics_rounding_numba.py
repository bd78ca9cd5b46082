"""metrics.round_to, metrics.ulp, metrics.rounding.rounding_deviation and metrics.encoding.encode: the numba passes (metrics/rounding_numba.py,
what CPU runs use) equal the torch definitions (E2E_METRICS_BACKEND=torch, what other devices use) bit
for bit, for every float format, saturating or not: NaN, infinities, zeros' signs, overflow and
subnormals included."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from e2egen import metrics
from e2egen.metrics import formats, rounding_numba
from e2egen.metrics.encoding import decode, encode
from e2egen.metrics.rounding import rounding_deviation
from e2egen.metrics.backend import ENV_VAR, numba_path

pytestmark = pytest.mark.skipif(not rounding_numba.AVAILABLE, reason="numba is not installed")

FLOAT_FORMATS = [name for name in formats.DTYPE_NAMES if not formats.get_format(name).is_integer]


def deviation(x: torch.Tensor, name: str) -> torch.Tensor:
    """rounding_deviation of x with errors of every kind: exactly x's distance to its nearest rounding
    boundary and the float64 on either side of it (where `>=` decides), fractions of |x|, 0, inf and NaN."""
    rounded = metrics.round_to(x, name)
    boundary = metrics.ulp(rounded, name) / 2 - (x - rounded).abs()
    errors = [boundary.abs(), torch.nextafter(boundary.abs(), torch.tensor(math.inf, dtype=torch.float64)),
              torch.nextafter(boundary.abs(), torch.tensor(0.0, dtype=torch.float64)), x.abs() * 2.0 ** -9,
              x.abs() * 2.0 ** -30, torch.zeros_like(x), torch.full_like(x, math.inf), torch.full_like(x, math.nan)]
    return torch.cat([rounding_deviation(x, error, name) for error in errors])


OPERATIONS = {
    "round_to": lambda x, name: metrics.round_to(x, name),
    "round_to saturating": lambda x, name: metrics.round_to(x, name, saturate=True),
    "ulp": lambda x, name: metrics.ulp(x, name),
    "rounding_deviation": deviation,
}


def same_bits(got: torch.Tensor, want: torch.Tensor) -> bool:
    """Equal bit patterns (so -0.0 differs from +0.0), any NaN matching any NaN."""
    return bool(((got.view(torch.int64) == want.view(torch.int64)) | (got.isnan() & want.isnan())).all())


def by_torch(operation, x, name, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setenv(ENV_VAR, "torch")
        return operation(x, name)


def awkward(name: str, count: int = 20_000, seed: int = 0) -> torch.Tensor:
    """Every value of the format up to 16 bits (else values around 1 and max), with their float64
    neighbours and the midpoints to the next value; random float64 bit patterns and magnitudes; specials."""
    fmt = formats.get_format(name)
    if fmt.bits <= 8:
        values = decode(torch.arange(1 << fmt.bits), name)
    elif fmt.bits == 16:
        values = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(fmt.torch_dtype).double()
    if fmt.bits <= 16:
        values = values[torch.isfinite(values)].unique()
    else:
        values = torch.tensor([1.0, fmt.max, fmt.min_normal, fmt.min_subnormal], dtype=torch.float64)
        values = torch.cat([values, -values])
    midpoints = (values[:-1] + values[1:]) / 2
    around = torch.cat([values, midpoints])
    neighbours = torch.cat([around, torch.nextafter(around, torch.full_like(around, math.inf)),
                            torch.nextafter(around, torch.full_like(around, -math.inf))])
    rng = np.random.default_rng(seed)
    bits = torch.from_numpy(rng.integers(-2 ** 63, 2 ** 63 - 1, size=count, dtype=np.int64)).view(torch.float64)
    scaled = torch.from_numpy(rng.standard_normal(count) * 2.0 ** rng.integers(-160, 140, size=count))
    specials = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 1.5 * 2.0 ** 127],
                            dtype=torch.float64)
    return torch.cat([neighbours, bits, scaled, specials])


def by_numba(operation, x, name, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setenv(ENV_VAR, "numba")  # the pass runs whatever the environment says (else this compared torch with torch)
        assert numba_path(torch.device("cpu"))
        return operation(x, name)


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("name", FLOAT_FORMATS)
def test_numba_pass_equals_the_torch_definition(name, operation, monkeypatch):
    x = awkward(name)
    assert same_bits(by_numba(OPERATIONS[operation], x, name, monkeypatch),
                     by_torch(OPERATIONS[operation], x, name, monkeypatch))


@given(values=st.lists(st.floats(width=64), min_size=1, max_size=40), name=st.sampled_from(FLOAT_FORMATS),
       operation=st.sampled_from(sorted(OPERATIONS)))
@settings(max_examples=300, deadline=None)
def test_numba_pass_of_any_float64(values, name, operation):
    x = torch.tensor(values, dtype=torch.float64)
    with pytest.MonkeyPatch.context() as monkeypatch:
        want = by_torch(OPERATIONS[operation], x, name, monkeypatch)
        got = by_numba(OPERATIONS[operation], x, name, monkeypatch)
    assert same_bits(got, want)


def test_numpy_in_numpy_out_and_several_threads(monkeypatch):
    x = awkward("bf16", count=400_000, seed=5)  # several tasks of the thread pool
    got = by_numba(lambda values, name: metrics.round_to(values.numpy(), name), x, "bf16", monkeypatch)
    assert isinstance(got, np.ndarray)
    assert same_bits(torch.from_numpy(got), by_torch(OPERATIONS["round_to"], x, "bf16", monkeypatch))
    assert same_bits(by_numba(OPERATIONS["ulp"], x, "bf16", monkeypatch),
                     by_torch(OPERATIONS["ulp"], x, "bf16", monkeypatch))


def test_tensors_off_the_cpu_take_the_torch_definition_whatever_the_environment(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "numba")  # names the CPU path: other devices must not ask for it
    x = torch.tensor([1.0, 2.0 ** -30, 70000.0], dtype=torch.float64, device="meta")
    assert metrics.round_to(x, "f16").device.type == "meta" and metrics.ulp(x, "f16").device.type == "meta"


def test_narrow_inputs_are_widened_first():
    x = torch.tensor([1.0009765625, -3.0e-5, 70000.0], dtype=torch.float32)
    assert same_bits(metrics.round_to(x, "f16"), metrics.round_to(x.double(), "f16"))
    assert metrics.round_to(x, "f16").dtype == torch.float64


BYTE_FORMATS = [name for name in FLOAT_FORMATS if formats.get_format(name).bits <= 8 and formats.get_format(name).signed]


@pytest.mark.parametrize("saturate", [False, True])
@pytest.mark.parametrize("name", BYTE_FORMATS)
def test_codes_equal_the_torch_definition(name, saturate, monkeypatch):
    x = awkward(name)
    if formats.get_format(name).nan_pattern is None:
        x = x[~torch.isnan(x)]  # f4e2m1 has no NaN: encode refuses it (below)
    def operation(values, fmt):
        return encode(values, fmt, saturate=saturate)

    assert torch.equal(by_numba(operation, x, name, monkeypatch), by_torch(operation, x, name, monkeypatch))


@pytest.mark.parametrize("backend", ["numba", "torch"])
def test_a_format_without_nan_refuses_nan_on_both_paths(backend, monkeypatch):
    monkeypatch.setenv(ENV_VAR, backend)
    with pytest.raises(ValueError, match="f4e2m1 has no NaN: x has NaN at flat index 2"):
        encode(torch.tensor([1.0, -2.0, math.nan, 3.0]), "f4e2m1")
