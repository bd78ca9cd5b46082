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

torch is imported when a case runs, so generating a suite stays fast.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from e2egen.runner.errors import ProblemError
from e2egen.runner.dtypes import DTYPES, FLOAT4
from e2egen.runner.ops.base import ProductSumOp, Shape, frozen_mapping, int_tuple, require_int
from e2egen.runner.ops.product_sum.gemm import check_out_dtype, out_dtype_problem

if TYPE_CHECKING:
    import torch

SPATIAL_KEYS = {1: "w", 2: "hw", 3: "dhw"}
_DIM_NAMES = {1: ("w",), 2: ("h", "w"), 3: ("d", "h", "w")}
CONV_LAYOUTS = ("nchw", "nhwc")
CONV_DIRECTIONS = ("fwd", "bwd_data", "bwd_weight")


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


class ConvOp(ProductSumOp):
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

    def reduction_partials(self, problem: Any, inputs: Mapping[str, torch.Tensor], kind: str):
        # The partials keep the inputs' dtype: a case's out_dtype (fp8 convs with bf16 outputs) would round
        # f32 partials to its format on the way out of torch's conv (with_out_dtype).
        params, direction = dataclasses.replace(problem.params, out_dtype=""), problem.direction
        kernel = self.default_kernel(direction)
        if kind == "samples" and direction == "bwd_weight":
            samples = ({"x": inputs["x"][i:i + 1], "dy": inputs["dy"][i:i + 1]} for i in range(params.n))
            return (self._sample_weight_gradient(kernel, params, sample) for sample in samples)
        if kind == "taps" and direction != "bwd_weight":
            from e2egen.runner.ops.product_sum.conv_taps import bwd_data_tap_partials, tap_partial

            window = math.prod(params.kernel)
            if direction == "bwd_data":  # its reduction runs over the flipped kernel (lowering.py): last tap first
                return bwd_data_tap_partials(params, inputs, range(window - 1, -1, -1))
            return (tap_partial(direction, params, inputs, t) for t in range(window))
        return None

    def _sample_weight_gradient(self, kernel: Callable[..., torch.Tensor], params: ConvParams,
                                sample: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """One sample's weight gradient, as the reference would compute it for a batch of one (a 3-d one by
        depth taps: torch's CPU conv3d unfolds one sample's windows 1.8–3.7× slower)."""
        by_depth = self._by_depth_taps("bwd_weight", dataclasses.replace(params, n=1), sample)
        return by_depth if by_depth is not None else self.call(kernel, "bwd_weight", params, sample)

    def _by_depth_taps(self, direction: str, params: ConvParams, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor | None:
        """A 3-d convolution on the CPU as 2-d convolutions per depth tap, where that is faster than torch's
        conv3d (conv_depth.by_depth_is_faster); None elsewhere (torch's own convolution then runs)."""
        if self.spatial_dims != 3 or any(t.device.type != "cpu" for t in tensors.values()):
            return None
        from e2egen.runner.ops.product_sum.conv_depth import by_depth_is_faster, conv3d_by_depth

        if not by_depth_is_faster(params, direction, next(iter(tensors.values())).dtype):
            return None
        return conv3d_by_depth(direction, params, tensors)

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
                          out_dtype=params.out_dtype)

    def layout_problem(self, layout: str) -> str | None:
        from e2egen.runner.ops.product_sum.conv_layouts import layout_problem

        return layout_problem(layout, self.spatial_dims)

    def arrange(self, name: str, tensor: torch.Tensor, layout: str) -> torch.Tensor:
        from e2egen.runner.ops.product_sum.conv_layouts import arrange, splits_groups

        if layout in CONV_LAYOUTS:
            return channels_last(tensor) if layout == "nhwc" else tensor.contiguous()
        if splits_groups(layout):
            raise ValueError(f"layout {layout} splits the groups out: its tensors need the group count "
                             "(arrange_inputs)")
        return arrange(name, tensor, layout, self.spatial_dims, groups=1)

    def arrange_inputs(self, params: ConvParams, tensors: Mapping[str, torch.Tensor],
                       layout: str) -> dict[str, torch.Tensor]:
        from e2egen.runner.ops.product_sum.conv_layouts import arrange, splits_groups

        if not splits_groups(layout):
            return super().arrange_inputs(params, tensors, layout)
        return {name: arrange(name, t, layout, self.spatial_dims, params.groups) for name, t in tensors.items()}

    def reference(self, problem: Any, inputs64: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """torch's conv on the float64 inputs; a 3-d one on the CPU as 2-d convs per depth tap where that is
        faster (conv_depth). Also the bound's Σ|x|·|w| in f32 (magnitude.widened_sum)."""
        by_depth = self._by_depth_taps(problem.direction, problem.params, inputs64)
        if by_depth is not None:
            (name,) = self.output_names(problem.params, problem.direction)
            return {name: by_depth}
        return super().reference(problem, inputs64)

    def default_kernel(self, direction: str) -> Callable[..., torch.Tensor]:
        kernel = {"fwd": torch_conv_fwd, "bwd_data": torch_conv_bwd_data, "bwd_weight": torch_conv_bwd_weight}[direction]
        return with_out_dtype(kernel)

    def call(self, kernel: Callable[..., torch.Tensor], direction: str, params: ConvParams,
             tensors: Mapping[str, torch.Tensor]) -> Any:
        from e2egen.runner.ops.product_sum.conv_layouts import grouped_shape, ungrouped

        # Tensors one rank up from the logical one come from a layout that splits the groups out (arrange_inputs).
        grouped = any(t.dim() == self.spatial_dims + 3 for t in tensors.values())
        shape_of = functools.partial(grouped_shape, groups=params.groups) if grouped else lambda name, shape: shape
        keywords = dict(params.geometry)
        if params.out_dtype:
            from e2egen.runner.dtypes import storage_dtype

            keywords["out_dtype"] = storage_dtype(params.out_dtype)
        if direction == "fwd":
            result = kernel(tensors["x"], tensors["w"], **keywords)
        elif direction == "bwd_data":
            result = kernel(tensors["dy"], tensors["w"], input_shape=shape_of("dx", params.x_shape), **keywords)
        else:
            result = kernel(tensors["x"], tensors["dy"], weight_shape=shape_of("dw", params.w_shape), **keywords)
        if not grouped:
            return result
        (name,) = self.output_names(params, direction)
        expected = shape_of(name, self.output_shape(params, direction))
        got = tuple(result.shape) if hasattr(result, "shape") else type(result).__name__
        if got != expected:
            raise ValueError(f"returned {got}, expected {name} in its grouped shape {expected} (the layout splits "
                             "the groups out)")
        return ungrouped(name, result)


def channels_last(tensor: torch.Tensor) -> torch.Tensor:
    """Store a (N, C, *spatial) tensor with C fastest; the logical shape is unchanged."""
    import torch  # loaded already: the caller holds a tensor

    if tensor.dim() == 4:
        return tensor.contiguous(memory_format=torch.channels_last)
    if tensor.dim() == 5:
        return tensor.contiguous(memory_format=torch.channels_last_3d)
    # torch has no memory format for 3-d tensors: a transposed view of (N, L, C) storage.
    return tensor.movedim(1, -1).contiguous().movedim(-1, 1)


# -- torch's kernels, following the contract ---------------------------------------
@functools.cache
def _torch_functions() -> dict[str, dict[int, Callable[..., torch.Tensor]]]:
    """torch's conv functions by tensor rank, per direction (looked up on the first call)."""
    import torch
    import torch.nn.functional as F

    grad = torch.nn.grad
    return {
        "fwd": {3: F.conv1d, 4: F.conv2d, 5: F.conv3d},
        "bwd_data": {3: grad.conv1d_input, 4: grad.conv2d_input, 5: grad.conv3d_input},
        "bwd_weight": {3: grad.conv1d_weight, 4: grad.conv2d_weight, 5: grad.conv3d_weight},
    }


def _pairs(padding) -> tuple[tuple[int, int], ...] | None:
    """(begin, end) pairs when the padding is asymmetric somewhere, else None (torch pads symmetrically)."""
    if padding and not isinstance(padding[0], int):
        return tuple((int(b), int(e)) for b, e in padding)
    return None


def _pad_explicitly(x: torch.Tensor, pairs: tuple[tuple[int, int], ...]) -> torch.Tensor:
    import torch.nn.functional as F

    return F.pad(x, [q for b, e in reversed(pairs) for q in (b, e)])  # F.pad lists the last dim first


def _unpadded(padded: torch.Tensor, size, pairs) -> torch.Tensor:
    """The positions of a padded (N, C, *spatial) tensor that lie inside the unpadded input (a view)."""
    return padded[(..., *(slice(b, b + n) for n, (b, _) in zip(size, pairs)))]


def _is_grouped(tensor: torch.Tensor, stride) -> bool:
    """Whether a kernel's tensor comes with its groups split out (one rank above (N, C, *spatial))."""
    return tensor.dim() == len(stride) + 3


def with_out_dtype(kernel: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """torch's conv, its result converted to `out_dtype` when a case asks for one (float64 stays float64:
    the reference runs the same kernel)."""
    @functools.wraps(kernel)
    def run(*tensors: Any, out_dtype: Any = None, **keywords: Any) -> Any:
        import torch

        result = kernel(*tensors, **keywords)
        return result if out_dtype is None or result.dtype == torch.float64 else result.to(out_dtype)

    return run


def torch_conv_fwd(x: torch.Tensor, w: torch.Tensor, *, stride, padding, dilation, groups) -> torch.Tensor:
    if _is_grouped(x, stride):  # torch takes the logical shapes: merge the groups back, split the result
        return torch_conv_fwd(x.flatten(1, 2), w.flatten(0, 1), stride=stride, padding=padding, dilation=dilation,
                              groups=groups).unflatten(1, (groups, -1))
    pairs = _pairs(padding)
    if pairs is not None:  # torch's conv pads both sides alike: pad first, here in the kernel, not in the reference
        x, padding = _pad_explicitly(x, pairs), 0
    return _torch_functions()["fwd"][x.dim()](x, w, None, stride, padding, dilation, groups)


def torch_conv_bwd_data(dy: torch.Tensor, w: torch.Tensor, *, input_shape, stride, padding, dilation, groups) -> torch.Tensor:
    if _is_grouped(dy, stride):
        logical = (input_shape[0], input_shape[1] * input_shape[2], *input_shape[3:])
        return torch_conv_bwd_data(dy.flatten(1, 2), w.flatten(0, 1), input_shape=logical, stride=stride,
                                   padding=padding, dilation=dilation, groups=groups).unflatten(1, (groups, -1))
    pairs = _pairs(padding)
    if pairs is None:
        return _torch_functions()["bwd_data"][dy.dim()](list(input_shape), w, dy, stride, padding, dilation, groups)
    padded_shape = [*input_shape[:2], *(size + b + e for size, (b, e) in zip(input_shape[2:], pairs))]
    dx = _torch_functions()["bwd_data"][dy.dim()](padded_shape, w, dy, stride, 0, dilation, groups)
    return _unpadded(dx, input_shape[2:], pairs)


def torch_conv_bwd_weight(x: torch.Tensor, dy: torch.Tensor, *, weight_shape, stride, padding, dilation, groups) -> torch.Tensor:
    if _is_grouped(x, stride):
        logical = (weight_shape[0] * weight_shape[1], *weight_shape[2:])
        return torch_conv_bwd_weight(x.flatten(1, 2), dy.flatten(1, 2), weight_shape=logical, stride=stride,
                                     padding=padding, dilation=dilation, groups=groups).unflatten(0, (groups, -1))
    pairs = _pairs(padding)
    if pairs is not None:
        x, padding = _pad_explicitly(x, pairs), 0
    return _torch_functions()["bwd_weight"][x.dim()](x, list(weight_shape), dy, stride, padding, dilation, groups)


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
