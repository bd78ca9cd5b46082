"""The chains op family."""
