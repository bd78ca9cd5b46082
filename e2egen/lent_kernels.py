"""Kernels lent to the runner by e2egen.api for one call: a lambda, a closure or a bound method, which
Python cannot import by its own name, is put here under a fresh name and removed when the call ends."""
