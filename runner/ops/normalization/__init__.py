"""The normalization op family."""
