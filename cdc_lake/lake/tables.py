"""The captured tables: one declaration each, from which the lake's table is derived.

A declaration names the source table, its key and how the lake partitions it. Its columns are
not written here: they are the source's (``cdc_lake/lake/schema.py``), read from PostgreSQL's
catalog at each refresh, or from the table's ``CREATE TABLE`` in ``sql/`` where no database is
at hand (``declared_columns``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from cdc_lake import sql_dir
from cdc_lake.lake.schema import LakeSchema, SourceColumn, columns_from_ddl, initial


@dataclass(frozen=True)
class CapturedTable:
    source: str  # schema-qualified, as Debezium's table.include.list names it
    key: str  # the record key: one lake row per value
    ddl_file: str  # the file in sql/ whose CREATE TABLE declares it
    # The lake's partition column, and the source date column whose year it is ("": none).
    partition_field: str = ""
    partition_from: str = ""

    @property
    def name(self) -> str:
        return self.source.split(".")[-1]

    def declared_columns(self) -> list[SourceColumn]:
        """The columns as ``sql/`` creates them, for code that has no database at hand."""
        return list(_declared(self.source, self.ddl_file))

    def declared_schema(self) -> LakeSchema:
        return initial(self.source, self.key, self.declared_columns())


def or_declared(schema: LakeSchema | None) -> LakeSchema:
    """``schema``, or where a caller gives none (tests, benchmarks), the outbox's as ``sql/``
    declares it."""
    return schema if schema is not None else OUTBOX.declared_schema()


@cache
def _declared(source: str, ddl_file: str) -> tuple[SourceColumn, ...]:
    # Not on EMR (no sql/ there): the Spark apps get the columns in their parameters or from
    # the lake's commits.
    return tuple(columns_from_ddl((sql_dir() / ddl_file).read_text(), source))


OUTBOX = CapturedTable(
    source="datalake.cdc_events",
    key="order_id",
    ddl_file="002_outbox.sql",
    partition_field="order_year",
    partition_from="order_date",
)
