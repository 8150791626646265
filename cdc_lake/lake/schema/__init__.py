"""A captured table's columns: read from the source, evolved into the lake, and everything that
follows from them. The one home of a table's columns.

Which module holds what
    - ``source``: reading the source's columns, from PostgreSQL's catalog
      (``columns_from_catalog``) or from the table's ``CREATE TABLE`` (``columns_from_ddl``).
    - ``columns``: one column: the kinds (``KINDS``, ``PG_KINDS``), the column as the source
      declares it (``SourceColumn``) and as the lake holds it (``LakeColumn``, ``lake_column``),
      and the errors that stop a refresh (``SchemaChangeError``, ``UnsupportedColumnError``).
    - ``model``: the lake table's schema (``LakeSchema``), its JSON as each Hudi commit records
      it (``SCHEMA_KEY``, ``schema_json``), and its Spark structs and columns.
    - ``evolution``: the lake's schema after the source's columns change (``evolve`` and the
      rules it follows, ``initial``, ``from_lake_types``, ``to_backfill``, ``not_in_table``),
      the lake's columns against the source's (``compare``), and a change in a line
      (``describe_change``).
    - ``policy``: the column policies (``CapturedTable.exclude``, ``hashed``): the source's
      columns as the lake takes them (``captured_columns``, ``catalog_columns``) and a policy
      changed since the table was written (``check_policy``).
    - ``spark_types``: the Spark type of a DDL type name (``spark_type``), a raw field as the
      lake column, and a missing value as Debezium writes it (``raw_missing_value``).

The modules import one way only: ``source`` imports ``columns``; ``evolution`` imports ``model``
and ``columns``; ``model`` imports ``spark_types``, which imports ``columns``; ``policy``
imports ``columns``, ``model`` and ``source``. Code outside the
package imports the names below from here.
"""

from __future__ import annotations

from cdc_lake.lake.schema.columns import (
    FLOAT_KINDS,
    KINDS,
    PG_KINDS,
    TIME_KINDS,
    TIMESTAMP_KINDS,
    Kind,
    LakeColumn,
    SchemaChangeError,
    SourceColumn,
    UnsupportedColumnError,
    lake_column,
)
from cdc_lake.lake.schema.evolution import (
    SchemaDiff,
    compare,
    describe_change,
    evolve,
    from_lake_types,
    initial,
    not_in_table,
    to_backfill,
)
from cdc_lake.lake.schema.model import SCHEMA_KEY, LakeSchema, schema_json
from cdc_lake.lake.schema.policy import (
    captured_columns,
    captured_schema,
    catalog_columns,
    catalog_schema,
    check_policy,
)
from cdc_lake.lake.schema.source import columns_from_catalog, columns_from_ddl
from cdc_lake.lake.schema.spark_types import raw_missing_value, spark_type

__all__ = [
    "FLOAT_KINDS",
    "KINDS",
    "PG_KINDS",
    "SCHEMA_KEY",
    "TIMESTAMP_KINDS",
    "TIME_KINDS",
    "Kind",
    "LakeColumn",
    "LakeSchema",
    "SchemaChangeError",
    "SchemaDiff",
    "SourceColumn",
    "UnsupportedColumnError",
    "captured_columns",
    "captured_schema",
    "catalog_columns",
    "catalog_schema",
    "check_policy",
    "columns_from_catalog",
    "columns_from_ddl",
    "compare",
    "describe_change",
    "evolve",
    "from_lake_types",
    "initial",
    "lake_column",
    "not_in_table",
    "raw_missing_value",
    "schema_json",
    "spark_type",
    "to_backfill",
]
