"""The product-sum ops' kernels, following the contract (conv.py, gemm.py): torch's own, which the runner
calls by default, and the alternates and planted bugs the studies and tests plug in by impl string, e.g.
impl="e2egen.runner.ops.product_sum.kernels:split_k".

torch's kernels:
    torch_conv_fwd, torch_conv_bwd_data, torch_conv_bwd_weight   torch's conv and its gradients; asymmetric
                   padding padded here, in the kernel; a layout that splits the groups out merged back first
    with_out_dtype the conv's result converted to the case's out_dtype (an fp8 conv writing bf16)
    torch_gemm     torch.matmul; fp4 operands unpacked to f32 first (exact), the result in out_dtype

The alternates (docs/evidence/error-bound.md's study; studies/bound_evidence.py, aggregate_evidence.py and
arithmetic_evidence.py run them). Every name is one kernel for every conv and gemm direction: it tells the
direction from the keywords it gets (input_shape: conv bwd_data, weight_shape: conv bwd_weight, stride:
conv fwd, none: gemm). Each first writes the op as one batched matrix product lhs[G, M, R] @ rhs[G, R, N]
in f32 (lowering.py's im2col form; exact for f16/bf16/f32 inputs), so R is the reduction of every output
element, then sums it its own way and rounds once to the output dtype.

CORRECT (other summation orders; all within an f32-accumulation model):
    im2col_f32     one f32 batched matmul (the BLAS's own blocking)
    split_k        R cut into 8 slices, one f32 partial each, partials added in f32
    sequential_f32 recursive summation: one f32 running sum, one product at a time
                   (the order with the worst error growth, K·u in the worst case)
    pairwise_f32   f32 products summed as a balanced binary tree

WRONG (one bug each):
    acc_lowp       accumulates in a half format: products are added 4 at a time
                   (in f32) to a running sum rounded to f16 (bf16 for bf16 and
                   f32 inputs) after each step
    drop_last      the reduction loop stops one step early: the last input channel
                   (conv fwd), the last output channel (bwd_data), the last output
                   row (bwd_weight), the last k (gemm) is left out
    scale_3ulp     the result is off by 3 ulps: multiplied by (1 + 3·eps_T)
    shift_window   conv only: the window is shifted by one element along the last
                   spatial dim (padding applied one element off)
    one_element    one output element (the middle one) holds its neighbour's value
                   (the next element, in logical order, whose value differs)
    swap_channels  the last two channels of the first input (gemm: the last two
                   columns of A) are swapped, as a channel-stride bug would

SYSTEMATIC (small, one-signed errors; judged by studies/aggregate_evidence.py):
    scale_1ulp     the result is multiplied by (1 + eps_T): one ulp too large in magnitude
    bias_half_ulp  half an ulp of the result is added before the final rounding
    toward_zero    the f32 result is rounded toward zero to T instead of to nearest
    (and drop_last above: on a 1x1 conv with 1,024 channels or a gemm with K = 4,096
    it drops one channel / one K-slice: a 0.1 % or 0.02 % error of one sign on r4)

PLANTED (issue 12's blind cells; judged by studies/arithmetic_evidence.py):
    zero_output    returns all zeros (an unwritten dW)
    scale_5pct     the result is 5 % too large
    bf16_inputs    rounds both inputs to bf16 first ("performance" precision),
                   then sums in f32: a library that silently computes in bf16

Layout and padding bugs of conv2d fwd (studies/fused_evidence.py):
    conv_one_sided_padding  pads (begin + end) before each dim and nothing after
    conv_filter_as_kyxc     reads the filter's memory as kyxc whatever order the layout stored
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Literal, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch.nn import grad

from e2egen import metrics
from e2egen.runner import fp4
from e2egen.runner.gemm_form import GemmForm
from e2egen.runner.lowbit import FLOAT8_STORAGE, elements_f32, f16_running_sum, to_output
from e2egen.runner.ops.product_sum.conv import SPATIAL_KEYS
from e2egen.runner.ops.product_sum.lowering import lower
from e2egen.runner.problem import Problem, make_problem

Kernel = Callable[..., torch.Tensor]
# A kernel's padding: an int per spatial dim (symmetric), or a (begin, end) pair per dim.
Padding = Sequence[int] | Sequence[Sequence[int]]

# -- torch's kernels, following the contract ---------------------------------------
_TORCH_CONV: dict[str, dict[int, Kernel]] = {  # torch's conv functions by tensor rank, per direction
    "fwd": {3: F.conv1d, 4: F.conv2d, 5: F.conv3d},
    "bwd_data": {3: grad.conv1d_input, 4: grad.conv2d_input, 5: grad.conv3d_input},
    "bwd_weight": {3: grad.conv1d_weight, 4: grad.conv2d_weight, 5: grad.conv3d_weight},
}


def _pairs(padding: Padding) -> tuple[tuple[int, int], ...] | None:
    """(begin, end) pairs when the padding is asymmetric somewhere, else None (torch pads symmetrically)."""
    if padding and not isinstance(padding[0], int):
        return tuple((int(b), int(e)) for b, e in padding)
    return None


def pad_explicitly(x: torch.Tensor, pairs: Sequence[tuple[int, int]]) -> torch.Tensor:
    """x (N, C, *spatial) with zeros added before and after each spatial dim."""
    return F.pad(x, [q for b, e in reversed(pairs) for q in (b, e)])  # F.pad lists the last dim first


def unpadded(padded: torch.Tensor, size: Sequence[int], pairs: Sequence[tuple[int, int]]) -> torch.Tensor:
    """The positions of a padded (N, C, *spatial) tensor that lie inside the unpadded input (a view)."""
    return padded[(..., *(slice(b, b + n) for n, (b, _) in zip(size, pairs)))]


def _is_grouped(tensor: torch.Tensor, stride: Sequence[int]) -> bool:
    """Whether a kernel's tensor comes with its groups split out (one rank above (N, C, *spatial))."""
    return tensor.dim() == len(stride) + 3


def with_out_dtype(kernel: Kernel) -> Kernel:
    """torch's conv, its result converted to `out_dtype` when a case asks for one (float64 stays float64:
    the reference runs the same kernel)."""
    @functools.wraps(kernel)
    def run(*tensors: torch.Tensor, out_dtype: torch.dtype | None = None, **keywords: Any) -> torch.Tensor:
        result = kernel(*tensors, **keywords)
        return result if result.dtype == torch.float64 else to_output(result, out_dtype)

    return run


def torch_conv_fwd(x: torch.Tensor, w: torch.Tensor, *, stride: Sequence[int], padding: Padding,
                   dilation: Sequence[int], groups: int) -> torch.Tensor:
    if _is_grouped(x, stride):  # torch takes the logical shapes: merge the groups back, split the result
        return torch_conv_fwd(x.flatten(1, 2), w.flatten(0, 1), stride=stride, padding=padding, dilation=dilation,
                              groups=groups).unflatten(1, (groups, -1))
    pairs = _pairs(padding)
    if pairs is not None:  # torch's conv pads both sides alike: pad first, here in the kernel, not in the reference
        x, padding = pad_explicitly(x, pairs), 0
    return _TORCH_CONV["fwd"][x.dim()](x, w, None, stride, padding, dilation, groups)


def torch_conv_bwd_data(dy: torch.Tensor, w: torch.Tensor, *, input_shape: Sequence[int], stride: Sequence[int],
                        padding: Padding, dilation: Sequence[int], groups: int) -> torch.Tensor:
    if _is_grouped(dy, stride):
        logical = (input_shape[0], input_shape[1] * input_shape[2], *input_shape[3:])
        return torch_conv_bwd_data(dy.flatten(1, 2), w.flatten(0, 1), input_shape=logical, stride=stride,
                                   padding=padding, dilation=dilation, groups=groups).unflatten(1, (groups, -1))
    pairs = _pairs(padding)
    if pairs is None:
        return _TORCH_CONV["bwd_data"][dy.dim()](list(input_shape), w, dy, stride, padding, dilation, groups)
    padded_shape = [*input_shape[:2], *(size + b + e for size, (b, e) in zip(input_shape[2:], pairs))]
    dx = _TORCH_CONV["bwd_data"][dy.dim()](padded_shape, w, dy, stride, 0, dilation, groups)
    return unpadded(dx, input_shape[2:], pairs)


def torch_conv_bwd_weight(x: torch.Tensor, dy: torch.Tensor, *, weight_shape: Sequence[int], stride: Sequence[int],
                          padding: Padding, dilation: Sequence[int], groups: int) -> torch.Tensor:
    if _is_grouped(x, stride):
        logical = (weight_shape[0] * weight_shape[1], *weight_shape[2:])
        return torch_conv_bwd_weight(x.flatten(1, 2), dy.flatten(1, 2), weight_shape=logical, stride=stride,
                                     padding=padding, dilation=dilation, groups=groups).unflatten(0, (groups, -1))
    pairs = _pairs(padding)
    if pairs is not None:
        x, padding = pad_explicitly(x, pairs), 0
    return _TORCH_CONV["bwd_weight"][x.dim()](x, list(weight_shape), dy, stride, padding, dilation, groups)


TORCH_CONV_KERNELS: dict[str, Kernel] = {"fwd": torch_conv_fwd, "bwd_data": torch_conv_bwd_data,
                                         "bwd_weight": torch_conv_bwd_weight}


def torch_gemm(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """torch.matmul; fp4 operands unpacked to f32 first (exact), and the result converted to out_dtype."""
    if a.dtype == fp4.PACKED:
        a = fp4.unpack_along(a, -1)
    if b.dtype == fp4.PACKED:
        b = fp4.unpack_along(b, -2)
    result = torch.matmul(a, b) if a.dtype == b.dtype else torch.matmul(a.float(), b.float())
    return to_output(result, out_dtype)


# == the alternates: the contract -> one gemm form ==========================================
SPLITS = 8
LOWP_CHUNK = 4
_PAIRWISE_ELEMENTS = 1 << 23  # products held at once by pairwise_f32
CallKind = Literal["fwd", "bwd_data", "bwd_weight", "gemm"]
Summation = Callable[[torch.Tensor, torch.Tensor, torch.dtype], torch.Tensor]  # f32 lhs, rhs, out dtype -> [G, M, N]
Prepare = Callable[[CallKind, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
Finish = Callable[[CallKind, torch.Tensor], torch.Tensor]


def _direction(kw: Mapping[str, Any]) -> CallKind:
    if "input_shape" in kw:
        return "bwd_data"
    if "weight_shape" in kw:
        return "bwd_weight"
    return "fwd" if "stride" in kw else "gemm"


def _problem(direction: CallKind, first: torch.Tensor, second: torch.Tensor,
             kw: Mapping[str, Any]) -> tuple[Problem, dict[str, torch.Tensor]]:
    """A runner Problem with the call's geometry (dtype, range, seed are placeholders)."""
    if direction == "gemm":
        batch = first.shape[0] if first.dim() == 3 else 0
        m, k = first.shape[-2:]
        params = {"m": m, "n": second.shape[-1], "k": k, "batch": batch}
        return make_problem("gemm", "fwd", "f32", "nn", params, (-1.0, 1.0), 0), {"a": first, "b": second}
    if direction == "fwd":
        x_shape, w_shape, names = first.shape, second.shape, ("x", "w")
    elif direction == "bwd_data":
        x_shape, w_shape, names = tuple(kw["input_shape"]), second.shape, ("dy", "w")
    else:
        x_shape, w_shape, names = first.shape, tuple(kw["weight_shape"]), ("x", "dy")
    dims = len(x_shape) - 2
    key = SPATIAL_KEYS[dims]
    params = {"n": x_shape[0], "c": x_shape[1], "k": w_shape[0], key: list(x_shape[2:]), "kernel": list(w_shape[2:]),
              "stride": list(kw["stride"]), "pad": list(kw["padding"]), "dilation": list(kw["dilation"]),
              "groups": kw["groups"]}
    problem = make_problem(f"conv{dims}d", direction, "f32", "nchw", params, (-1.0, 1.0), 0)
    return problem, dict(zip(names, (first, second)))


def _gemm_form(direction: CallKind, first: torch.Tensor, second: torch.Tensor,
               kw: Mapping[str, Any]) -> tuple[Problem, GemmForm]:
    problem, tensors = _problem(direction, first, second, kw)
    form = lower(problem, {name: t.float() for name, t in tensors.items()})
    return problem, GemmForm(form.lhs.contiguous(), form.rhs.contiguous(), form.fold)


def _kernel(summation: Summation, prepare: Prepare | None = None, finish: Finish | None = None) -> Kernel:
    """A contract kernel: lower, sum with `summation` (f32 lhs, rhs -> [G, M, N]), round to the output dtype."""
    def kernel(first: torch.Tensor, second: torch.Tensor, **kw: Any) -> torch.Tensor:
        direction = _direction(kw)
        out_dtype = first.dtype
        if prepare is not None:
            first, second = prepare(direction, first, second)
        problem, form = _gemm_form(direction, first, second, kw)
        out = form.fold(summation(form.lhs, form.rhs, out_dtype)).to(out_dtype)
        if finish is not None:
            out = finish(direction, out)
        return out
    return kernel


# -- summation orders (f32 in, [G, M, N] out) -------------------------------------------------
def _bmm_f32(lhs: torch.Tensor, rhs: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    return torch.bmm(lhs, rhs)


def _split_k(lhs: torch.Tensor, rhs: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    reduction = lhs.shape[2]
    step = max(1, math.ceil(reduction / SPLITS))
    total = None
    for start in range(0, reduction, step):
        partial = torch.bmm(lhs[:, :, start:start + step], rhs[:, start:start + step, :])
        total = partial if total is None else total + partial
    return total


def _sequential(lhs: torch.Tensor, rhs: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    acc = lhs.new_zeros(lhs.shape[0], lhs.shape[1], rhs.shape[2])
    for r in range(lhs.shape[2]):
        acc.addcmul_(lhs[:, :, r:r + 1], rhs[:, r:r + 1, :])
    return acc


def _tree_sum(products: torch.Tensor, dim: int) -> torch.Tensor:
    while products.shape[dim] > 1:
        size = products.shape[dim]
        half = size // 2
        head = products.narrow(dim, 0, half) + products.narrow(dim, half, half)
        if size % 2:
            head = torch.cat([head, products.narrow(dim, 2 * half, 1)], dim)
        products = head
    return products.squeeze(dim)


def _pairwise(lhs: torch.Tensor, rhs: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    groups, rows, reduction = lhs.shape
    cols = rhs.shape[2]
    block = max(1, _PAIRWISE_ELEMENTS // max(1, groups * reduction * cols))
    parts = [_tree_sum(lhs[:, start:start + block, :, None] * rhs[:, None, :, :], 2)
             for start in range(0, rows, block)]
    return torch.cat(parts, 1)


def _lowp_accumulator(out_dtype: torch.dtype) -> torch.dtype:
    return torch.float16 if out_dtype == torch.float16 else torch.bfloat16


def _acc_lowp(lhs: torch.Tensor, rhs: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    low = _lowp_accumulator(out_dtype)
    acc = lhs.new_zeros(lhs.shape[0], lhs.shape[1], rhs.shape[2])
    for start in range(0, lhs.shape[2], LOWP_CHUNK):
        acc = (acc + torch.bmm(lhs[:, :, start:start + LOWP_CHUNK], rhs[:, start:start + LOWP_CHUNK, :])).to(low).float()
    return acc


def _drop_last(lhs: torch.Tensor, rhs: torch.Tensor, out_dtype: torch.dtype, *, count: int) -> torch.Tensor:
    return torch.bmm(lhs[:, :, :lhs.shape[2] - count], rhs[:, :rhs.shape[1] - count, :])


def _scaled(lhs: torch.Tensor, rhs: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    eps = torch.finfo(out_dtype).eps
    return torch.bmm(lhs, rhs).double() * (1 + 3 * eps)


# -- the alternates ------------------------------------------------------------------------
im2col_f32 = _kernel(_bmm_f32)
split_k = _kernel(_split_k)
sequential_f32 = _kernel(_sequential)
pairwise_f32 = _kernel(_pairwise)

acc_lowp = _kernel(_acc_lowp)
scale_3ulp = _kernel(_scaled)


def drop_last(first: torch.Tensor, second: torch.Tensor, **kw: Any) -> torch.Tensor:
    direction = _direction(kw)
    problem, form = _gemm_form(direction, first, second, kw)
    p = problem.params
    if direction in ("fwd", "bwd_data"):
        count = math.prod(p.kernel)  # one channel's taps: the last channel of the reduction (c, r, s) / (k, r', s')
    elif direction == "bwd_weight":
        count = math.prod(p.out_size[1:])  # one output row: the end of (n, p, q)
    else:
        count = 1
    return form.fold(_drop_last(form.lhs, form.rhs, first.dtype, count=count)).to(first.dtype)


def _shift_input(direction: CallKind, first: torch.Tensor, second: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if direction == "gemm":
        raise ValueError("shift_window is a convolution bug; gemm has no window")
    if direction in ("fwd", "bwd_weight"):  # x shifted right by one: the window starts one element early
        shifted = torch.zeros_like(first)
        shifted[..., 1:] = first[..., :-1]
        return shifted, second
    return first, second


def _shift_output(direction: CallKind, out: torch.Tensor) -> torch.Tensor:
    if direction == "bwd_data":  # the adjoint of the shifted window: dx shifted left by one
        shifted = torch.zeros_like(out)
        shifted[..., :-1] = out[..., 1:]
        return shifted
    return out


shift_window = _kernel(_bmm_f32, prepare=_shift_input, finish=_shift_output)


def _copy_neighbour(direction: CallKind, out: torch.Tensor) -> torch.Tensor:
    """The middle element gets the value of the next element (in logical order) that differs from it."""
    flat = out.contiguous().reshape(-1).clone()
    middle = flat.numel() // 2
    order = torch.cat([flat[middle + 1:], flat[:middle]])
    differs = (order != flat[middle]).nonzero()
    if differs.numel():
        flat[middle] = order[differs[0, 0]]
    return flat.reshape(out.shape)


one_element = _kernel(_bmm_f32, finish=_copy_neighbour)


def _swap_last_two(direction: CallKind, first: torch.Tensor, second: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dim = -1 if direction == "gemm" else 1
    if first.shape[dim] < 2:
        raise ValueError(f"swap_channels needs 2 channels, got shape {tuple(first.shape)}")
    swapped = first.clone()
    index = first.shape[dim]
    swapped.narrow(dim, index - 2, 1).copy_(first.narrow(dim, index - 1, 1))
    swapped.narrow(dim, index - 1, 1).copy_(first.narrow(dim, index - 2, 1))
    return swapped, second


swap_channels = _kernel(_bmm_f32, prepare=_swap_last_two)


def _zero(direction: CallKind, out: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(out)


def _scale_5pct(direction: CallKind, out: torch.Tensor) -> torch.Tensor:
    return (out.double() * 1.05).to(out.dtype)


def _round_inputs_bf16(direction: CallKind, first: torch.Tensor, second: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return first.to(torch.bfloat16).to(first.dtype), second.to(torch.bfloat16).to(second.dtype)


def _scaled_1ulp(lhs: torch.Tensor, rhs: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    return torch.bmm(lhs, rhs).double() * (1 + torch.finfo(out_dtype).eps)


def _ulp_of(values: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """The gap above |values| in the output format (float64)."""
    name = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}[out_dtype]
    return metrics.ulp(values, name)


def _bias_half_ulp(lhs: torch.Tensor, rhs: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    exact = torch.bmm(lhs.double(), rhs.double())
    return exact + 0.5 * _ulp_of(exact, out_dtype)


def _round_toward_zero(lhs: torch.Tensor, rhs: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    exact = torch.bmm(lhs.double(), rhs.double())
    nearest = exact.to(out_dtype).double()
    # a neighbour of larger magnitude than the exact value steps one value back toward zero
    too_big = nearest.abs() > exact.abs()
    down = torch.nextafter(nearest.to(out_dtype), torch.zeros_like(nearest).to(out_dtype)).double()
    return torch.where(too_big, down, nearest)


scale_1ulp = _kernel(_scaled_1ulp)
bias_half_ulp = _kernel(_bias_half_ulp)
toward_zero = _kernel(_round_toward_zero)
zero_output = _kernel(_bmm_f32, finish=_zero)
scale_5pct = _kernel(_bmm_f32, finish=_scale_5pct)
bf16_inputs = _kernel(_bmm_f32, prepare=_round_inputs_bf16)

CORRECT = ("im2col_f32", "split_k", "sequential_f32", "pairwise_f32")
PLANTED = ("zero_output", "scale_5pct", "bf16_inputs")
SYSTEMATIC = ("drop_last", "scale_1ulp", "bias_half_ulp", "toward_zero")
WRONG = ("acc_lowp", "drop_last", "scale_3ulp", "shift_window", "one_element", "swap_channels")
CONV_ONLY = ("shift_window",)


# -- layout and padding bugs of conv2d fwd (studies/fused_evidence.py) ---------------------------
def conv_one_sided_padding(x: torch.Tensor, w: torch.Tensor, *, stride: Sequence[int], padding: Padding,
                           dilation: Sequence[int], groups: int) -> torch.Tensor:
    pairs = padding if not isinstance(padding[0], int) else [(p, p) for p in padding]
    xp = F.pad(x, [q for b, e in reversed(pairs) for q in (b + e, 0)])
    return F.conv2d(xp, w, None, stride, 0, dilation, groups)


def conv_filter_as_kyxc(x: torch.Tensor, w: torch.Tensor, *, stride: Sequence[int], padding: Padding,
                        dilation: Sequence[int], groups: int) -> torch.Tensor:
    """Reads w's memory as kyxc whatever the layout stored."""
    stored = w.permute(*[w.stride().index(s) for s in sorted(w.stride(), reverse=True)]).contiguous()
    assumed = stored.reshape(w.shape[0], w.shape[2], w.shape[3], w.shape[1]).permute(0, 3, 1, 2)
    return torch_conv_fwd(x, assumed.contiguous(), stride=stride, padding=padding, dilation=dilation, groups=groups)


# -- low-bit gemm through gemm's plug-in contract f(a, b) or f(a, b, out_dtype=...), fp8 or i8 tensors --------
# (the low-bit evidence, studies/lowbit_evidence.py; the scaled gemm's are runner/ops/scaled_gemm/kernels.py)
# CORRECT: fp8_f32, fp8_split_k, i8_int32, i8_int64. WRONG: fp8_fnuz_read_as_fn, fp8_f16_accumulator,
# i8_i16_accumulator.
# -- plain fp8 gemm ----------------------------------------------------------------------------------------
def _gemm_out(c: torch.Tensor, out_dtype) -> torch.Tensor:
    return to_output(c, out_dtype)


def fp8_f32(a, b, out_dtype=None):
    return _gemm_out(elements_f32(a, -1) @ elements_f32(b, -2), out_dtype)


def fp8_split_k(a, b, out_dtype=None):
    a32, b32 = elements_f32(a, -1), elements_f32(b, -2)
    k = a32.shape[-1]
    step = -(-k // 4)
    slices = [a32[..., s:s + step] @ b32[..., s:s + step, :] for s in range(0, k, step)]
    total = slices[0]
    for part in slices[1:]:
        total = total + part
    return _gemm_out(total, out_dtype)


def fp8_unsaturated(a, b, out_dtype=None):
    """WRONG for an fp8 output: OCP's conversion without saturation, a result beyond the format's largest finite
    value NaN (e4m3fn) or inf (e5m2) where the contract saturates it."""
    c = elements_f32(a, -1) @ elements_f32(b, -2)
    if out_dtype is None or out_dtype not in FLOAT8_STORAGE:
        return _gemm_out(c, out_dtype)
    info = torch.finfo(out_dtype)
    largest = info.max
    half_step = info.eps * 2.0 ** (math.frexp(largest)[1] - 2)  # half the spacing below the largest finite value
    beyond = c.abs() >= largest + half_step  # rounds past the largest finite value: no number there
    overflowed = torch.full_like(c, float("nan") if out_dtype == torch.float8_e4m3fn else float("inf")).copysign(c)
    return torch.where(beyond, overflowed, c.clamp(-largest, largest)).to(out_dtype)


def fp8_fnuz_read_as_fn(a, b, out_dtype=None):
    return _gemm_out(elements_f32(a, -1, fnuz_as_fn=True) @ elements_f32(b, -2, fnuz_as_fn=True), out_dtype)


def fp8_f16_accumulator(a, b, out_dtype=None):
    return _gemm_out(f16_running_sum(elements_f32(a, -1), elements_f32(b, -2)).to(torch.float32), out_dtype)


# -- plain i8 gemm -----------------------------------------------------------------------------------------
def i8_int32(a, b):
    return a.to(torch.int32) @ b.to(torch.int32)


def i8_int64(a, b):
    return (a.to(torch.int64) @ b.to(torch.int64)).to(torch.int32)


def i8_i16_accumulator(a, b):
    total = torch.zeros((*a.shape[:-1], b.shape[-1]), dtype=torch.int16)
    for kk in range(a.shape[-1]):
        total = total + a[..., kk:kk + 1].to(torch.int16) * b[..., kk:kk + 1, :].to(torch.int16)  # wraps
    return total.to(torch.int32)
