"""A captured table's columns where no database is at hand: as its ``CREATE TABLE`` in ``sql/``
declares them.

The declarations themselves (source, key, partitioning) are in ``cdc_lake/source/captured.py``.
At each refresh the columns are read from PostgreSQL's catalog instead
(``cdc_lake/lake/schema/source.py``); these are for code without a database: tests, benchmarks, and
the lake's fallback before its first commit.
"""

from __future__ import annotations

from functools import cache

from cdc_lake import sql_dir
from cdc_lake.lake.schema import LakeSchema, SourceColumn, columns_from_ddl, initial
from cdc_lake.source.captured import CapturedTable


def declared_columns(table: CapturedTable) -> list[SourceColumn]:
    """The columns of ``table`` as ``sql/`` creates them."""
    return list(_declared(table.source, table.ddl_file))


def declared_schema(table: CapturedTable) -> LakeSchema:
    return initial(table.source, table.key, declared_columns(table))


@cache
def _declared(source: str, ddl_file: str) -> tuple[SourceColumn, ...]:
    # Not on EMR (no sql/ there): the Spark apps get the columns in their parameters or from
    # the lake's commits.
    return tuple(columns_from_ddl((sql_dir() / ddl_file).read_text(), source))
