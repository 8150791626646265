"""The lake's columns of a table: for a refresh, the source's evolved into the lake's
(``lake_schema``); for a reader, the ones an existing table holds (``table_schema``). The
evolution itself: ``cdc_lake/lake/schema.py``."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from cdc_lake.lake import transforms as T
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.hudi_timeline import data_column_types, latest_schema, table_exists
from cdc_lake.lake.schema import (
    LakeColumn,
    LakeSchema,
    SchemaChangeError,
    SourceColumn,
    evolve,
    from_lake_types,
    not_in_table,
    to_backfill,
)
from cdc_lake.lake.schema.policy import captured_columns, check_policy
from cdc_lake.source.captured import CapturedTable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import SparkSession


def lake_schema(
    spark: SparkSession,
    table: HudiTableConfig,
    source_columns: Sequence[SourceColumn] | None,
    captured: CapturedTable,
    declared: Sequence[SourceColumn] | None = None,
) -> tuple[LakeSchema, tuple[LakeColumn, ...], tuple[LakeColumn, ...]]:
    """The lake's columns of the table ``captured`` declares, once the source's are taken
    (``SchemaChangeError`` if they cannot be), the columns whose missing value the stored
    rows get in this commit (``schema.to_backfill``), and the columns the table does not have
    yet (``schema.not_in_table``). ``source_columns``: as the source's catalog
    lists them; None when it could not be read: then the columns the newest commit recorded,
    or for a table without any, ``declared``: the ones ``sql/`` declares, as Dagster read them
    (``UpsertParams.declared_columns``). The app itself never reads ``sql/`` (EMR has none)."""
    exists = table_exists(spark, table.base_path)
    recorded = latest_schema(spark, table.base_path) if exists else None
    # The source's column names, when its catalog was read (a column it lacks is a drop).
    names = None if source_columns is None else [c.name for c in source_columns]
    if source_columns is None:
        source_columns = (
            [SourceColumn(c.name, str(c.source_type), True, c.position) for c in recorded.live]
            if recorded is not None
            else list(declared or ())
        )
        if not source_columns:
            raise SchemaChangeError(
                f"{captured.source}: its columns are unknown: the source's catalog could not be "
                "read, the lake table has no commit yet, and the declaration names no ddl_file. "
                "Nothing was committed. Fix: make the source reachable, then refresh again."
            )
    # The column policies: excluded columns left out, hashed ones of kind "hashed"; a policy
    # changed since the table was written stops here, before anything is written.
    source_columns = captured_columns(captured, source_columns, strict=False)
    check_policy(captured, recorded, names)
    lake_only = (*T.CDC_COLUMNS, *captured.lake_partition)
    lake_types = data_column_types(spark, table.base_path, lake_only) if exists else None
    schema = evolve(captured.source, captured.key, source_columns, lake_types, recorded)
    schema = replace(
        schema, excluded=captured.exclude, hashed_fields=captured.hashed_fields
    )
    return schema, to_backfill(lake_types, recorded, schema), not_in_table(lake_types, schema)


def table_schema(spark: SparkSession, base_path: str, captured: CapturedTable) -> LakeSchema | None:
    """The columns of an existing lake table, as its newest commit recorded them or, for a
    table from before, as its types tell, with the source table, key and lake-only partition
    columns that ``captured`` declares; None when there is no table. For readers of the
    table, which need no source (the order items, on EMR too)."""
    if not table_exists(spark, base_path):
        return None
    recorded = latest_schema(spark, base_path)
    if recorded is not None:
        return recorded
    lake_types = data_column_types(spark, base_path, (*T.CDC_COLUMNS, *captured.lake_partition))
    return from_lake_types(captured.source, captured.key, lake_types)
