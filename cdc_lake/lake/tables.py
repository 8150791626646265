"""A captured table's columns where no database is at hand: as its ``CREATE TABLE`` in ``sql/``
declares them.

The declarations themselves (source, key, partitioning) are in ``cdc_lake/source/captured.py``.
At each refresh the columns are read from PostgreSQL's catalog instead
(``cdc_lake/lake/schema/source.py``). These are read on the Dagster side only, and travel in the
upsert app's parameters (``UpsertParams.declared_columns``) for a first commit whose source
cannot be read; the Spark apps never read ``sql/`` (EMR has none). Tests and benchmarks use them
as the outbox's columns.
"""

from __future__ import annotations

from functools import cache

from cdc_lake import sql_dir
from cdc_lake.lake.schema import LakeSchema, SourceColumn, columns_from_ddl
from cdc_lake.lake.schema.policy import captured_columns, captured_schema
from cdc_lake.source.captured import CapturedTable


def declared_columns(table: CapturedTable) -> list[SourceColumn]:
    """The columns of ``table`` as ``sql/`` creates them; none for a table whose declaration
    names no ``ddl_file`` (its columns come from the source's catalog alone)."""
    return list(_declared(table.source, table.ddl_file)) if table.ddl_file else []


def declared_schema(table: CapturedTable) -> LakeSchema:
    """The lake schema of a new table of ``table`` with its ``sql/`` columns, under its column
    policies."""
    return captured_schema(table, captured_columns(table, declared_columns(table)))


@cache
def _declared(source: str, ddl_file: str) -> tuple[SourceColumn, ...]:
    return tuple(columns_from_ddl((sql_dir() / ddl_file).read_text(), source))
