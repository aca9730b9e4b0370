"""The scheduling framework: pure, deterministic, no I/O."""
