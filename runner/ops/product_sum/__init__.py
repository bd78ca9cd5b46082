"""The product sum op family."""
