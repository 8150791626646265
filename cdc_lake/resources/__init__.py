"""Dagster resources, and the one switch that picks their set: ``CDC_LAKE_ENV=local|prod``.

Every secret is a ``dg.EnvVar``: it is read when a run starts, never at import, and it never
reaches asset metadata or logs. For the local stack, ``cdc-lake stack up`` writes the variables
to ``.env`` at the project root (mode 0600, git-ignored), which ``dagster dev`` loads.

One module per idea: ``source`` (PostgreSQL), ``streaming`` (Kafka, Connect, the pipeline's
names), ``lake`` (the Hudi table), ``spark`` (where the Spark apps run), ``local`` and ``prod``
(the two resource sets).
"""

from __future__ import annotations

import os
from typing import Any

from cdc_lake.resources.local import local_resources
from cdc_lake.resources.prod import prod_resources


def build_resources(env: str | None = None) -> dict[str, Any]:
    """The resource set chosen by ``CDC_LAKE_ENV`` (``local``, the default, or ``prod``)."""
    env = env or os.environ.get("CDC_LAKE_ENV", "local")
    if env == "local":
        return local_resources()
    if env == "prod":
        return prod_resources()
    raise ValueError(f"CDC_LAKE_ENV={env!r} is not a known environment; use 'local' or 'prod'")
