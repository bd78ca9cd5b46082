"""The reductions op family."""
