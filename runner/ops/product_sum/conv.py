"""Convolutions with 1, 2 or 3 spatial dims, in three directions.

Logical shapes (what every tensor's `.shape` is, whatever its layout):
    x  (N, C, *spatial)          w  (K, C/groups, *kernel)
    y  (N, K, *out_spatial)      out_spatial = (in + pad_begin + pad_end − dilation·(kernel − 1) − 1) // stride + 1

Directions and the kernel contract (tensors on the device, in the case's
dtype and memory layout; stride and dilation as tuples of ints; padding a tuple of ints when every dim
is padded symmetrically, else a tuple of (begin, end) pairs, one per spatial dim):
    fwd:        f(x, w, *, stride, padding, dilation, groups) -> y
    bwd_data:   f(dy, w, *, input_shape, stride, padding, dilation, groups) -> dx
    bwd_weight: f(x, dy, *, weight_shape, stride, padding, dilation, groups) -> dw
input_shape / weight_shape are the logical shapes of dx / dw as tuples.

Layouts: "nchw" keeps every tensor contiguous; "nhwc" stores x, w and dy
channels-last (torch.channels_last for 2d, channels_last_3d for 3d, and for
1d a transposed (N, C, L) view of a contiguous (N, L, C) tensor); any other
per-tensor memory order is a layout string "input-filter-output" in rocMLIR's
spelling (conv_layouts.py), e.g. "nhwc-yxck-nhwk". A layout string that puts
the group dim away from the dim it splits ("nghwc-gkyxc-nghwk") gives every
tensor with the groups split out: x (N, G, C/G, *spatial), w (G, K/G, C/G,
*kernel), y (N, G, K/G, *out); input_shape / weight_shape are then those
grouped shapes, and the kernel returns its output grouped too.

This module is the spec (no torch); torch's kernels are in kernels.py, the numerics (layouts' storage,
reference, partial sums, probes) in numerics.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

from e2egen.runner.dtypes import DTYPES, FLOAT4
from e2egen.runner.errors import ProblemError
from e2egen.runner.ops.base import ProductSumOp, Shape, frozen_mapping, int_tuple, require_int
from e2egen.runner.ops.product_sum import conv_layouts
from e2egen.runner.ops.product_sum.gemm import check_out_dtype, out_dtype_problem, probe_out_dtype

SPATIAL_KEYS = {1: "w", 2: "hw", 3: "dhw"}
_DIM_NAMES = {1: ("w",), 2: ("h", "w"), 3: ("d", "h", "w")}
_KERNEL_DIM_NAMES = {1: ("s",), 2: ("r", "s"), 3: ("t", "r", "s")}
ConvLayout = Literal["nchw", "nhwc"]
CONV_LAYOUTS: tuple[ConvLayout, ...] = ("nchw", "nhwc")
ConvDirection = Literal["fwd", "bwd_data", "bwd_weight"]
CONV_DIRECTIONS: tuple[ConvDirection, ...] = ("fwd", "bwd_data", "bwd_weight")


@dataclass(frozen=True)
class ConvParams:
    """A convolution's geometry, normalised: every spatial quantity is a tuple."""

    n: int
    c: int
    k: int
    size: tuple[int, ...]  # input spatial sizes (catalogue key w / hw / dhw)
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    pad: tuple[int, ...]  # padding before each spatial dim (and after, unless pad_end says otherwise)
    dilation: tuple[int, ...]
    groups: int = 1
    pad_end: tuple[int, ...] = ()  # padding after each dim, when it differs somewhere from `pad`
    out_dtype: str = ""  # "": the dtype's own output format (fp8 only: f32, bf16 or f16)

    def __post_init__(self) -> None:
        dims = len(self.size) if isinstance(self.size, tuple) else 0
        if dims not in SPATIAL_KEYS:
            raise ProblemError("size", self.size, f"a convolution has 1, 2 or 3 spatial dims, got {dims}")
        for key in ("n", "c", "k", "groups"):
            require_int(key, getattr(self, key), 1)
        if self.pad_end == self.pad:
            object.__setattr__(self, "pad_end", ())  # one form per problem: symmetric is ()
        for key, minimum in (("size", 1), ("kernel", 1), ("stride", 1), ("pad", 0), ("dilation", 1)) + (
                (("pad_end", 0),) if self.pad_end else ()):
            catalogue_key = self.spatial_key if key == "size" else key
            value = getattr(self, key)
            if not isinstance(value, tuple):
                raise ProblemError(catalogue_key, value, f"expected a tuple of {dims} integers ({self._dims_text}), got {value!r}")
            int_tuple(catalogue_key, value, dims, minimum, self._dims_text)
        if self.c % self.groups or self.k % self.groups:
            divisors = [g for g in range(1, math.gcd(self.c, self.k) + 1) if self.c % g == 0 and self.k % g == 0]
            raise ProblemError("groups", self.groups,
                               f"groups = {self.groups} must divide both c = {self.c} and k = {self.k}", divisors)
        for name, size, out in zip(_DIM_NAMES[dims], self.size, self.out_size):
            if out < 1:
                raise ProblemError(self.spatial_key, list(self.size),
                                   f"output {name} would be {out} (< 1): input {name} {size} is smaller than the dilated "
                                   f"kernel with padding (kernel {list(self.kernel)}, dilation {list(self.dilation)}, pad {self.pad_text})")

    @property
    def spatial_dims(self) -> int:
        return len(self.size)

    @property
    def spatial_key(self) -> str:
        return SPATIAL_KEYS[len(self.size)]

    @property
    def _dims_text(self) -> str:
        return ", ".join(_DIM_NAMES[len(self.size)])

    @property
    def symmetric(self) -> bool:
        return not self.pad_end

    @property
    def pads(self) -> tuple[tuple[int, int], ...]:
        """(begin, end) padding per spatial dim."""
        return tuple(zip(self.pad, self.pad_end or self.pad))

    @property
    def padded_size(self) -> tuple[int, ...]:
        """The input's spatial sizes with its padding."""
        return tuple(size + b + e for size, (b, e) in zip(self.size, self.pads))

    def tap_positions(self, offsets: tuple[int, ...]) -> tuple[slice, ...]:
        """The positions of the padded input that the window position `offsets` meets, one per output position."""
        return tuple(slice(r * d, r * d + s * (o - 1) + 1, s)
                     for r, d, s, o in zip(offsets, self.dilation, self.stride, self.out_size))

    @property
    def pad_text(self) -> str:
        return str(list(self.pad)) if self.symmetric else str([list(pair) for pair in self.pads])

    @property
    def out_size(self) -> tuple[int, ...]:
        return tuple((i + b + e - d * (r - 1) - 1) // s + 1
                     for i, r, s, (b, e), d in zip(self.size, self.kernel, self.stride, self.pads, self.dilation))

    @property
    def x_shape(self) -> Shape:
        return (self.n, self.c, *self.size)

    @property
    def w_shape(self) -> Shape:
        return (self.k, self.c // self.groups, *self.kernel)

    @property
    def y_shape(self) -> Shape:
        return (self.n, self.k, *self.out_size)

    @property
    def geometry(self) -> dict[str, Any]:
        """The keyword arguments every conv kernel receives."""
        return {"stride": self.stride, "padding": self.pad if self.symmetric else self.pads, "dilation": self.dilation,
                "groups": self.groups}

    def to_catalogue(self) -> dict[str, Any]:
        """The catalogue form (round-trips through ConvOp.parse_params)."""
        return {"n": self.n, "c": self.c, "k": self.k, self.spatial_key: list(self.size), "kernel": list(self.kernel),
                "stride": list(self.stride), "pad": list(self.pad) if self.symmetric else [list(p) for p in self.pads],
                "dilation": list(self.dilation), "groups": self.groups, **({"out_dtype": self.out_dtype} if self.out_dtype else {})}

    def describe(self) -> str:
        def dims(t: tuple[int, ...]) -> str:
            return "x".join(map(str, t))
        return (f"n={self.n} c={self.c} k={self.k} {self.spatial_key}={dims(self.size)} kernel={dims(self.kernel)} "
                f"stride={dims(self.stride)} pad={dims(self.pad) if self.symmetric else self.pad_text.replace(' ', '')} "
                f"dilation={dims(self.dilation)} groups={self.groups}" + (f" out={self.out_dtype}" if self.out_dtype else ""))


class ConvOp(ProductSumOp[ConvParams]):
    numerics = "e2egen.runner.ops.product_sum.numerics:ConvNumerics"
    directions = CONV_DIRECTIONS
    layouts = CONV_LAYOUTS
    dtypes = tuple(d for d in DTYPES if d not in FLOAT4)  # fp4 is an MX gemm format: no fp4 convolutions

    def __init__(self, spatial_dims: int):
        self.spatial_dims = spatial_dims
        self.name = f"conv{spatial_dims}d"
        self.spatial_key = SPATIAL_KEYS[spatial_dims]
        self.param_names = ("n", "c", "k", self.spatial_key, "kernel")
        self.optional_params = frozen_mapping({"stride": 1, "pad": 0, "dilation": 1, "groups": 1, "out_dtype": ""})

    def __repr__(self) -> str:
        return f"ConvOp({self.name})"

    @property
    def params_type(self) -> type:
        return ConvParams

    def _build_params(self, raw: Mapping[str, Any]) -> ConvParams:
        dims = self.spatial_dims
        text = ", ".join(_DIM_NAMES[dims])
        pad, pad_end = pad_pairs(raw["pad"], dims, text)
        return ConvParams(
            n=require_int("n", raw["n"], 1),
            c=require_int("c", raw["c"], 1),
            k=require_int("k", raw["k"], 1),
            size=int_tuple(self.spatial_key, raw[self.spatial_key], dims, 1, text),
            kernel=int_tuple("kernel", raw["kernel"], dims, 1, text),
            stride=int_tuple("stride", raw["stride"], dims, 1, text),
            pad=pad,
            dilation=int_tuple("dilation", raw["dilation"], dims, 1, text),
            groups=require_int("groups", raw["groups"], 1),
            pad_end=pad_end,
            out_dtype=check_out_dtype(raw["out_dtype"]),
        )

    def dtype_params_problem(self, params: ConvParams, dtype: str) -> str | None:
        return out_dtype_problem(params.out_dtype, dtype)


    def input_shapes(self, params: ConvParams, direction: str) -> dict[str, Shape]:
        return {
            "fwd": {"x": params.x_shape, "w": params.w_shape},
            "bwd_data": {"dy": params.y_shape, "w": params.w_shape},
            "bwd_weight": {"x": params.x_shape, "dy": params.y_shape},
        }[direction]

    def output_shape(self, params: ConvParams, direction: str) -> Shape:
        return {"fwd": params.y_shape, "bwd_data": params.x_shape, "bwd_weight": params.w_shape}[direction]

    def output_names(self, params: ConvParams, direction: str) -> tuple[str, ...]:
        return ({"fwd": "y", "bwd_data": "dx", "bwd_weight": "dw"}[direction],)

    def reduction_size(self, params: ConvParams, direction: str) -> int:
        window = math.prod(params.kernel)
        if direction == "fwd":
            return params.c // params.groups * window
        if direction == "bwd_data":
            return params.k // params.groups * window
        return params.n * math.prod(params.out_size)

    def scratch_elements(self, params: ConvParams, direction: str) -> int:
        """torch's float64 convolutions on the CPU unfold every window of the batch (im2col/col2im): C·R·S
        values per output position, in every direction. A 3-d one (conv_depth) unfolds 1/depth-taps of that
        per call, and copies the padded input's depths a tap meets, up to the padded input."""
        windows = params.n * params.c * math.prod(params.kernel) * math.prod(params.out_size)
        if params.spatial_dims != 3:
            return windows
        return windows + params.n * params.c * math.prod(params.padded_size)

    def flops(self, params: ConvParams, direction: str) -> int:
        # Every direction performs the forward pass's multiply-adds (bwd_data's
        # reduction_size also counts the taps that meet a stride gap or border).
        return 2 * params.n * params.k * math.prod(params.out_size) * (params.c // params.groups) * math.prod(params.kernel)

    def reduction_parts(self, params: ConvParams, direction: str) -> tuple[int, int]:
        if direction == "bwd_weight":
            return params.n, 1
        return 1, math.prod(params.kernel)

    def shape_class(self, params: ConvParams, direction: str) -> str:
        words = ["1x1" if math.prod(params.kernel) == 1 else "window"]
        if any(s > 1 for s in params.stride):
            words.append("strided")
            span = [d * (r - 1) + 1 for r, d in zip(params.kernel, params.dilation)]
            if words[0] == "window" and all(s >= w for s, w in zip(params.stride, span)):
                words.append("disjoint")  # windows that do not overlap: backward passes need no overlapping sums
        if any(d > 1 for d in params.dilation):
            words.append("dilated")
        if params.groups > 1:
            words.append("grouped")
        if params.out_dtype:
            words.append(f"out-{params.out_dtype}")
        return "-".join(words)

    def probe_params(self, params: ConvParams, direction: str) -> ConvParams:
        """Two samples of 16 channels per group on a small image, with the case's window, stride, dilation
        and groups: cheap, and every per-sample or per-tap cut shows."""
        dims = params.spatial_dims
        span = [d * (r - 1) + 1 for r, d in zip(params.kernel, params.dilation)]
        side = {1: 24, 2: 8, 3: 5}[dims]
        size = tuple(max(side, s + st) for s, st in zip(span, params.stride))
        pad = tuple(min(p, (s - 1) // 2) for p, s in zip(params.pad, span))
        pad_end = tuple(min(p, (s - 1) // 2) for p, s in zip(params.pad_end, span))
        return ConvParams(n=2, c=16 * params.groups, k=16 * params.groups, size=size, kernel=params.kernel,
                          stride=params.stride, pad=pad, dilation=params.dilation, groups=params.groups, pad_end=pad_end,
                          out_dtype=probe_out_dtype(params.out_dtype))

    def layout_problem(self, layout: str) -> str | None:
        return conv_layouts.layout_problem(layout, self.spatial_dims)

    def owns_params(self, params: Any) -> bool:
        """A conv's params with this op's number of spatial dims (conv1d's are not conv2d's)."""
        return isinstance(params, ConvParams) and params.spatial_dims == self.spatial_dims

    def lowered_dims(self, params: ConvParams, direction: str) -> tuple[int, int, int, int]:
        """(G, M, R, Ncol) of lowering.py's form: groups, then im2col's rows, reduction and columns."""
        g, window = params.groups, math.prod(params.kernel)
        if direction == "fwd":
            return (g, params.n * math.prod(params.out_size), params.c // g * window, params.k // g)
        if direction == "bwd_data":
            return (g, params.n * math.prod(params.size), params.k // g * window, params.c // g)
        return (g, params.k // g, params.n * math.prod(params.out_size), params.c // g * window)

    def output_dim_names(self, params: ConvParams, direction: str) -> tuple[str, ...]:
        dims = params.spatial_dims
        return {
            "fwd": ("n", "k", *_DIM_NAMES[dims]),
            "bwd_data": ("n", "c", *_DIM_NAMES[dims]),
            "bwd_weight": ("k", "c", *_KERNEL_DIM_NAMES[dims]),
        }[direction]

    def accumulation_chunks(self, params: ConvParams, direction: str) -> frozenset[int]:
        """Multiples of the window (one to 2^11 windows: per-tap or per-channel blocks); for bwd_weight also
        one sample's output positions (one to 2^5 samples) and one output row."""
        window = math.prod(params.kernel)
        sizes = {window * 2 ** i for i in range(0, 12)}
        if direction == "bwd_weight":
            positions = math.prod(params.out_size)
            sizes |= {positions * 2 ** i for i in range(0, 6)} | {params.out_size[-1]}
        return frozenset(sizes)


def pad_pairs(value: Any, dims: int, dims_text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The catalogue's pad: an int, a list of ints (symmetric per dim) or a list of [begin, end] pairs
    (asymmetric, e.g. [[1, 2], [0, 1]]) -> (begin, end) tuples; end is () when symmetric."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and any(
            isinstance(item, Sequence) and not isinstance(item, (str, bytes)) for item in value):
        form = f"a list of {dims} [begin, end] pairs ({dims_text})"
        if len(value) != dims or not all(isinstance(item, Sequence) and not isinstance(item, (str, bytes))
                                         and len(item) == 2 for item in value):
            raise ProblemError("pad", value, f"expected {form}, got {value!r}")
        begin = int_tuple("pad", [item[0] for item in value], dims, 0, dims_text)
        end = int_tuple("pad", [item[1] for item in value], dims, 0, dims_text)
        return begin, (() if begin == end else end)
    return int_tuple("pad", value, dims, 0, dims_text), ()
