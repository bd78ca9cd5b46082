"""The attention op family."""
