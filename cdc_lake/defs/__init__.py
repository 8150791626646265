"""Dagster definitions, one folder per pipeline stage; loaded by ``load_from_defs_folder``."""
