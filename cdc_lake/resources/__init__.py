"""Dagster resources, and the one switch that picks their set: ``CDC_LAKE_ENV=local|prod``.

Every secret is a ``dg.EnvVar``: it is read when a run starts, never at import, and it never
reaches asset metadata or logs. For the local stack, ``cdc-lake stack up`` writes the variables
to ``.env`` at the project root (mode 0600, git-ignored), which ``dagster dev`` loads.

The Dagster definitions take the set ``pinned``: a run's config cannot set any resource field,
so a run launched from the UI cannot point a resource at another endpoint or read its secret
from another variable (``{env: CDC_LAKE_S3_SECRET_KEY}`` as the Connect password). Such a run
config fails validation, naming the resource and its fields, before anything runs.

One module per idea: ``source`` (PostgreSQL), ``streaming`` (Kafka, Connect, the pipeline's
names), ``lake`` (the Hudi table), ``spark`` (where the Spark apps run), ``local`` and ``prod``
(the two resource sets, imported only when chosen).
"""

from __future__ import annotations

import os
from typing import Any

import dagster as dg

ENVIRONMENTS = ("local", "prod")  # the first is the default


def environment_name() -> str:
    """``CDC_LAKE_ENV``, the resource set to use: ``local`` (default) or ``prod``."""
    return os.environ.get("CDC_LAKE_ENV", ENVIRONMENTS[0])


def build_resources(env: str | None = None) -> dict[str, Any]:
    """The resource set chosen by ``CDC_LAKE_ENV`` (``environment_name``). Each set's module
    is imported only when it is chosen, not with this package."""
    env = env or environment_name()
    if env == "local":
        from cdc_lake.resources.local import local_resources

        return local_resources()
    if env == "prod":
        from cdc_lake.resources.prod import prod_resources

        return prod_resources()
    choices = " or ".join(repr(e) for e in ENVIRONMENTS)
    raise ValueError(f"CDC_LAKE_ENV={env!r} is not a known environment; use {choices}")


def pinned(resources: dict[str, Any]) -> dict[str, Any]:
    """Each ``ConfigurableResource`` as a definition whose config is fixed here and whose run
    config schema is empty: any resource config in a run's config is an error. Values, and the
    ``EnvVar`` names of secrets, are resolved when a run starts, as before; nested resources are
    wired as before."""
    out: dict[str, Any] = {}
    for key, resource in resources.items():
        if not isinstance(resource, dg.ConfigurableResource):
            out[key] = resource
            continue
        nested = set(resource.nested_resources)
        config = {
            k: v
            for k, v in resource._convert_to_config_dictionary().items()  # noqa: SLF001
            if k not in nested
        }
        out[key] = resource.get_resource_definition().configured(
            lambda _run_config, fixed=config: fixed, config_schema={}
        )
    return out
