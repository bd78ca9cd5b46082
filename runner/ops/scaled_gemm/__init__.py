"""The scaled gemm op family."""
