"""Test-only helpers that the tests and the benchmarks share; never shipped to EMR."""
