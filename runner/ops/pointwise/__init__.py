"""The pointwise op family."""
