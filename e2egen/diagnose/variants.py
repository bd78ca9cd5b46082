"""The references `explain` compares one kernel output against.

Two families:

* Reference variants: the runner's own (`runner.ReferenceOptions`): plain
  float64, `ftz`, `accumulate = k` (chunks of k products, running sum rounded
  to f32), `round_output`, and the reference on the device. Computed in full
  by the runner from the case's inputs.

* Accumulator models (this module): what a kernel that keeps its partial sums
  in a narrow format would return. The reduction of every output element is
  cut into chunks of k consecutive products (in the order of the op's lowered form,
  OpNumerics.lowered, e.g. runner/ops/product_sum/lowering.py, or where the op cuts its reduction per
  tap, "tap-major": one chunk per kernel tap, taps in order or reversed), each chunk summed exactly, and

      running:  s = round_A(s + chunk)            (a running sum kept in A)
      split:    s = round_A(s + round_A(chunk))   (chunk results stored in A,
                                                   then added in A: split-K,
                                                   col2im, per-sample partials)

  A is the output format when it is narrower than f32 (f16, bf16), else f32.
  The runner's `accumulate = k` is (natural, k, running, f32). torch's CPU
  f16 backward convolutions are such kernels: bwd_weight keeps dW in f16
  between samples (natural order, k = the output positions of one sample),
  bwd_data is im2col's transpose, col2im (one f16 partial per tap, added in
  f16).

  Searching many models over every output element would cost a full chunked
  reference each, so the search runs on a sample of output elements (the
  worst ones and a seeded random set): their products are gathered once and
  every model is a reshape, a sum and a short sequential loop over chunks.
  Only the best model is then computed in full (when affordable).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import torch

from e2egen import metrics
from e2egen import runner
from e2egen.runner.gemm_form import GemmForm
from e2egen.runner.inputs import round_to_storage
from e2egen.runner.ops.base import ProductSumOp

_TORCH_FORMATS = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
ACC_VARIANT_CHUNKS = (4, 8, 16, 32)  # the runner's accumulate = k variants explain prints (plus the whole reduction)
MAX_CHUNKS_PER_MODEL = 4096  # a model with more chunks than this is not searched (the loop is sequential)
FULL_MODEL_BUDGET = 4e8  # chunks x output elements above which the best model stays sampled


# -- runner reference variants --------------------------------------------------------------
@dataclass(frozen=True)
class ReferenceVariant:
    key: str  # short id: plain, ftz, acc4, acc_all, round_output, device
    label: str  # as printed
    options: runner.ReferenceOptions
    role: str  # "plain" | "ftz" | "accumulate" | "round_output" | "device"

    @property
    def compare_ftz(self) -> bool:
        """compare(..., ftz=): a flushing reference accepts out = 0 where the exact result is subnormal."""
        return self.options.ftz


def reference_variants(problem: runner.Problem) -> list[ReferenceVariant]:
    """plain, ftz, accumulate 4 8 16 32 and the whole reduction, round_output, device."""
    R = runner.ReferenceOptions
    variants = [ReferenceVariant("plain", "plain float64", R(), "plain"),
                ReferenceVariant("ftz", "ftz", R(ftz=True), "ftz")]
    reduction = problem.reduction_size
    for k in ACC_VARIANT_CHUNKS:
        if k < reduction:
            variants.append(ReferenceVariant(f"acc{k}", f"accumulate = {k}", R(accumulate=k), "accumulate"))
    variants.append(ReferenceVariant("acc_all", f"accumulate = {reduction} (whole)", R(accumulate=reduction), "accumulate"))
    variants.append(ReferenceVariant("round_output", "round_output", R(round_output=True), "round_output"))
    variants.append(ReferenceVariant("device", "reference on the device", R(device="device"), "device"))
    return variants


# -- accumulator models ---------------------------------------------------------------------
@dataclass(frozen=True)
class AccumulatorModel:
    fmt: str  # f16 | bf16 | f32: the format partial sums are kept in
    chunk: int  # products per chunk
    order: str = "natural"  # natural | taps | taps-reversed
    partials: str = "running"  # running | split

    def describe(self) -> str:
        how = "running sum" if self.partials == "running" else "partials"
        if self.order == "natural":
            return f"{self.fmt} {how}, chunks of {self.chunk}"
        taps = "taps" if self.order == "taps" else "taps reversed"
        return f"{self.fmt} {how}, one chunk of {self.chunk} per tap ({taps})"

    @property
    def key(self) -> str:
        return f"{self.fmt}:{self.order}:{self.partials}:{self.chunk}"

    @property
    def catalogue_terms(self) -> str:
        """How the catalogue would say it, as far as it can."""
        if self.fmt == "f32" and self.order == "natural" and self.partials == "running":
            return f"reference.accumulate = {self.chunk}"
        return f'bound.acc = "{self.fmt}"'


def accumulator_format(out_dtype: str) -> str:
    """The narrow format a kernel would keep partials in: the output's when narrower than f32."""
    return out_dtype if out_dtype in ("f16", "bf16") else "f32"


def conv_taps(problem: runner.Problem) -> tuple[int, int] | None:
    """(channels per tap, taps) of a reduction the op cuts per kernel tap (a conv's fwd / bwd_data, (c|k, r, s)
    order: ProductSumOp.reduction_parts); None otherwise."""
    spec = problem.spec
    if not isinstance(spec, ProductSumOp):
        return None
    _, taps = spec.reduction_parts(problem.params, problem.direction)
    if taps == 1:
        return None
    return problem.reduction_size // taps, taps


def candidate_models(problem: runner.Problem) -> list[AccumulatorModel]:
    """The models searched: natural-order chunks of powers of two and of the lengths the op names
    (ProductSumOp.accumulation_chunks: a conv's window multiples and, bwd_weight, one sample's output
    positions), running and split; per-tap chunks where the op cuts its reduction per tap."""
    fmt = accumulator_format(problem.out_dtype)
    reduction = problem.reduction_size
    sizes = {2 ** i for i in range(1, 13)}
    spec = problem.spec
    if isinstance(spec, ProductSumOp):
        sizes |= spec.accumulation_chunks(problem.params, problem.direction)
    sizes = sorted(s for s in sizes if 1 < s < reduction and math.ceil(reduction / s) <= MAX_CHUNKS_PER_MODEL)
    models = [AccumulatorModel(fmt, k, "natural", partials) for k in sizes for partials in ("running", "split")]
    taps = conv_taps(problem)
    if taps is not None:
        per_tap, _ = taps
        models += [AccumulatorModel(fmt, per_tap, order, partials)
                   for order in ("taps", "taps-reversed") for partials in ("running", "split")]
    return models


def _rounder(fmt: str):
    dtype = _TORCH_FORMATS[fmt]
    if dtype == torch.float32:
        return lambda x: x.to(torch.float32).to(torch.float64)  # float64 -> float32 rounds once
    return lambda x: round_to_storage(x, dtype).to(torch.float64)  # correctly rounded (torch's cast rounds twice)


def _reorder_columns(products: torch.Tensor, order: str, taps: tuple[int, int] | None) -> torch.Tensor:
    """[..., R] in (channel, tap) order -> tap-major (optionally taps reversed)."""
    if order == "natural":
        return products
    per_tap, window = taps
    shaped = products.reshape(*products.shape[:-1], per_tap, window).transpose(-1, -2)
    if order == "taps-reversed":
        shaped = shaped.flip(-2)
    return shaped.reshape(*products.shape[:-1], per_tap * window)


def accumulate_sequence(chunks: torch.Tensor, model: AccumulatorModel) -> torch.Tensor:
    """Fold chunk sums [..., n_chunks] (exact, float64) into the model's result (float64, in model.fmt)."""
    rnd = _rounder(model.fmt)
    total = torch.zeros(chunks.shape[:-1], dtype=torch.float64, device=chunks.device)
    for j in range(chunks.shape[-1]):
        part = chunks[..., j]
        if model.partials == "split":
            part = rnd(part)
        total = rnd(total + part)
    return total


def _chunk_sums(products: torch.Tensor, chunk: int) -> torch.Tensor:
    """[S, R] -> [S, ceil(R/chunk)] sums of consecutive products (zero padded)."""
    s, r = products.shape
    n = math.ceil(r / chunk)
    if n * chunk != r:
        products = torch.nn.functional.pad(products, (0, n * chunk - r))
    return products.reshape(s, n, chunk).sum(-1)


# -- sampled search -------------------------------------------------------------------------
@dataclass(frozen=True)
class SampledProducts:
    """The products of a set of output elements: [S, R] float64 (exact), with their flat logical indices."""

    indices: torch.Tensor  # [S] int64, flat logical output index
    products: torch.Tensor  # [S, R]


def lowered_index_map(form: GemmForm) -> torch.Tensor:
    """For every flat logical output index, the flat index into the lowered [G, M, Ncol] product."""
    g, m, _ = form.lhs.shape
    n = form.rhs.shape[2]
    ids = torch.arange(g * m * n, dtype=torch.float64).reshape(g, m, n)  # exact below 2**53
    return form.fold(ids).contiguous().reshape(-1).to(torch.int64)


def sample_products(form: GemmForm, logical_indices: torch.Tensor) -> SampledProducts:
    g, m, r = form.lhs.shape
    n = form.rhs.shape[2]
    lowered = lowered_index_map(form)[logical_indices]
    gi, rest = lowered // (m * n), lowered % (m * n)
    mi, ni = rest // n, rest % n
    lhs_rows = form.lhs[gi, mi, :]  # [S, R]
    rhs_cols = form.rhs.transpose(1, 2)[gi, ni, :]  # [S, R]
    return SampledProducts(logical_indices, lhs_rows * rhs_cols)


def model_on_sample(sample: SampledProducts, model: AccumulatorModel, taps: tuple[int, int] | None) -> torch.Tensor:
    products = _reorder_columns(sample.products, model.order, taps)
    return accumulate_sequence(_chunk_sums(products, model.chunk), model)


SAMPLE_PRODUCTS = 2 ** 24  # float64 products the sample may hold (128 MiB)


def choose_sample(ref: torch.Tensor, out: torch.Tensor, out_dtype: str, seed: int, reduction: int, worst: int = 512,
                  random: int = 2048) -> torch.Tensor:
    """Flat logical indices: every element when there are few, else the `worst` by ulps and `random` more
    (fewer when the reduction is so long that their products would exceed SAMPLE_PRODUCTS)."""
    total = ref.numel()
    budget = max(64, SAMPLE_PRODUCTS // max(reduction, 1))
    if worst + random > budget:
        worst, random = budget // 4, budget - budget // 4
    if total <= worst + random:
        return torch.arange(total)
    err = (ref.reshape(-1) - out.reshape(-1).to(torch.float64)).abs()
    eps = err / metrics.ulp(ref.reshape(-1), out_dtype)
    eps = torch.nan_to_num(eps, nan=0.0, posinf=0.0)
    top = torch.topk(eps, worst).indices
    generator = torch.Generator().manual_seed(seed % (2 ** 63))
    others = torch.randperm(total, generator=generator)[:random]
    return torch.unique(torch.cat([top, others]))


# -- full model reference -----------------------------------------------------------------------
def model_reference(form: GemmForm, model: AccumulatorModel, taps: tuple[int, int] | None) -> torch.Tensor:
    """The model's result for every output element (float64, logical shape)."""
    lhs, rhs = form.lhs, form.rhs
    if model.order != "natural":
        lhs = _reorder_columns(lhs, model.order, taps)
        rhs = _reorder_columns(rhs.transpose(1, 2), model.order, taps).transpose(1, 2)
    rnd = _rounder(model.fmt)
    g, m, r = lhs.shape
    total = torch.zeros(g, m, rhs.shape[2], dtype=torch.float64, device=lhs.device)
    for start in range(0, r, model.chunk):
        part = torch.bmm(lhs[:, :, start:start + model.chunk], rhs[:, start:start + model.chunk, :])
        if model.partials == "split":
            part = rnd(part)
        total = rnd(total + part)
    return form.fold(total).contiguous()


def full_model_affordable(problem: runner.Problem, model: AccumulatorModel) -> bool:
    return math.ceil(problem.reduction_size / model.chunk) * problem.output_elements <= FULL_MODEL_BUDGET


def lowered_form(problem: runner.Problem, inputs64: Mapping[str, torch.Tensor]) -> GemmForm:
    form = problem.numerics.lowered(problem, inputs64)
    if form is None:
        raise ValueError(f"{problem.op} has no lowered form: no accumulator model applies")
    return form


def sample_eps(values: torch.Tensor, out: torch.Tensor, out_dtype: str) -> float:
    """max |values - out| / ulp(values) over finite, in-range elements (0 when none)."""
    fmt = metrics.get_format(out_dtype)
    out64 = out.to(torch.float64)
    ok = torch.isfinite(values) & torch.isfinite(out64) & (values.abs() <= fmt.max)
    if not bool(ok.any()):
        return 0.0
    eps = (values[ok] - out64[ok]).abs() / metrics.ulp(values[ok], out_dtype)
    return float(eps.max())
