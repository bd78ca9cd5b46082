"""conv3d by depth taps (runner/ops/product_sum/conv_depth.py) against torch's CPU conv3d (the baseline), same run.

    .venv/bin/python benchmarks/bench_conv3d.py [--repeats 5]

A C3D layer (64 -> 64 channels, 8x28x28, 3x3x3, pad 1) at batch 1, 2 and 4, every direction, in float64
(the reference) and f32 (the bound's sum of |x|·|w|); median milliseconds of --repeats after one warm-up
call, and which one the reference takes (conv_depth.by_depth_is_faster).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_bound import median_seconds  # noqa: E402  (this folder is on the path when a script runs)
from bench_tool_work import positive  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=positive, default=5)
    args = parser.parse_args()

    import torch

    from e2egen.runner.ops.product_sum.conv import ConvParams
    from e2egen.runner.ops.product_sum.conv_depth import by_depth_is_faster, conv3d_by_depth
    from e2egen.runner.ops.product_sum.kernels import torch_conv_bwd_data, torch_conv_bwd_weight, torch_conv_fwd

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print("| dtype | n | direction | torch conv3d (baseline) | by depth taps | speed-up | reference takes |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for dtype in (torch.float64, torch.float32):
        for n in (1, 2, 4):
            params = ConvParams(n=n, c=64, k=64, size=(8, 28, 28), kernel=(3, 3, 3), stride=(1, 1, 1), pad=(1, 1, 1),
                                dilation=(1, 1, 1))
            generator = torch.Generator().manual_seed(0)
            t = {name: torch.randn(shape, generator=generator, dtype=dtype)
                 for name, shape in (("x", params.x_shape), ("w", params.w_shape), ("dy", params.y_shape))}
            geometry = params.geometry
            baselines = {
                "fwd": lambda: torch_conv_fwd(t["x"], t["w"], **geometry),
                "bwd_data": lambda: torch_conv_bwd_data(t["dy"], t["w"], input_shape=params.x_shape, **geometry),
                "bwd_weight": lambda: torch_conv_bwd_weight(t["x"], t["dy"], weight_shape=params.w_shape, **geometry),
            }
            for direction, baseline in baselines.items():
                torch_ms = median_seconds(baseline, args.repeats) * 1e3
                depth_ms = median_seconds(lambda: conv3d_by_depth(direction, params, t), args.repeats) * 1e3
                takes = "depth taps" if by_depth_is_faster(params, direction, dtype) else "torch"
                print(f"| {str(dtype).removeprefix('torch.')} | {n} | {direction} | {torch_ms:.1f} ms | {depth_ms:.1f} ms "
                      f"| {torch_ms / depth_ms:.2f} | {takes} |")


if __name__ == "__main__":
    main()
