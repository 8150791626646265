"""The Dagster instance's runs: which finished ones it may forget."""
