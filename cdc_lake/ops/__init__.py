"""The commands: ``cdc-lake`` (``cli``), the demo, the catch-up refresh, the lake's repairs, and
the stack's Dagster instance with its daemon and token-gated webserver. The top layer: nothing
else in the package imports them."""
