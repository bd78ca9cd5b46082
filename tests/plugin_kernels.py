"""Deliberately wrong plug-in kernels used by the generator's end-to-end tests."""
import torch


def gemm_off_by_one_percent(a, b):
    """A gemm that scales its result by 1.01: any sane tolerance must catch it."""
    return torch.matmul(a, b) * 1.01
