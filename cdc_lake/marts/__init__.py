"""Datasets built from the lake: the flattened order items and their chart."""
