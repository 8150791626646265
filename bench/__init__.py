"""cdc-lake benchmarks: ``python -m bench --help``."""
