"""The lake table's schema (``LakeSchema``): its data columns in lake order, its record key and
its schema version; its JSON (``schema_json``), which each Hudi commit records in its extra
metadata (``SCHEMA_KEY``); and the Spark structs and columns that read raw lines and change-feed
images into the lake's columns."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_lake.lake.schema.columns import KINDS, TIMESTAMP_KINDS, LakeColumn
from cdc_lake.lake.schema.spark_types import _to_lake, raw_missing_value, spark_type
from cdc_lake.source.captured import key_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

# Options starting with "_" become the Hudi commit's extra metadata.
SCHEMA_KEY = "_cdc_lake.schema"


@dataclass(frozen=True)
class LakeSchema:
    """The lake table's data columns (lake order) and its schema version."""

    table: str  # the source table, schema-qualified: named in errors
    # The record key: one column, or several (a composite key), in the declaration's order.
    keys: tuple[str, ...]
    columns: tuple[LakeColumn, ...]
    version: int = 1
    # The source's columns the declaration excludes (CapturedTable.exclude), as the lake was
    # written: a column excluded later, or no longer, is a policy change
    # (``cdc_lake/lake/schema/policy.py``).
    excluded: tuple[str, ...] = ()
    # The fields of jsonb columns the source connector hashes (``<column>.<field>``, from
    # CapturedTable.hashed); excluded fields are in ``excluded``. Both change a JSON column's
    # text as the lake holds it, which the digest applies to the source's
    # (``cdc_lake/lake/digest.py``).
    hashed_fields: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def live(self) -> tuple[LakeColumn, ...]:
        """The columns the source still has: what the digest covers."""
        return tuple(c for c in self.columns if not c.dropped)

    @property
    def hashed(self) -> tuple[str, ...]:
        """The live columns the source connector hashes (``cdc_lake/lake/schema/policy.py``)."""
        return tuple(c.name for c in self.live if c.kind == "hashed")

    def field_policies(self, column: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The (excluded, hashed) fields of the jsonb column ``column``: none for most."""

        def of(names: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(sorted(f for c, _, f in (n.partition(".") for n in names)
                                if f and c == column))  # fmt: skip

        return of(self.excluded), of(self.hashed_fields)

    @property
    def dropped(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.dropped)

    def column(self, name: str) -> LakeColumn:
        return next(c for c in self.columns if c.name == name)

    def digest_signature(self) -> list[str]:
        """What a digest over these columns covers: ``name:kind`` of the live ones, sorted."""
        return sorted(f"{c.name}:{c.kind}" for c in self.live)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            # One key column as a string, as schemas recorded before composite keys have it.
            "key": self.keys[0] if len(self.keys) == 1 else list(self.keys),
            "version": self.version,
            "columns": [
                {
                    "name": c.name,
                    "kind": c.kind,
                    "source_type": c.source_type,
                    "position": c.position,
                    **({"missing_value": c.missing_value} if c.missing_value is not None else {}),
                }
                for c in self.columns
            ],
            **({"excluded": list(self.excluded)} if self.excluded else {}),
            **({"hashed_fields": list(self.hashed_fields)} if self.hashed_fields else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LakeSchema:
        return cls(
            table=str(data["table"]),
            keys=key_columns(data["key"]),
            version=int(data.get("version", 1)),
            columns=tuple(
                LakeColumn(
                    str(c["name"]),
                    str(c["kind"]),
                    c.get("source_type"),
                    c.get("position"),
                    c.get("missing_value"),
                )
                for c in data["columns"]
            ),
            excluded=tuple(str(c) for c in data.get("excluded", ())),
            hashed_fields=tuple(str(c) for c in data.get("hashed_fields", ())),
        )

    # Spark

    def raw_struct(self, extra: Iterable[tuple[str, str]] = ()) -> StructType:
        """The raw JSON line's schema: the data columns as Debezium writes them, then ``extra``
        (Debezium's and the sink's own fields) as (name, Spark type)."""
        from pyspark.sql.types import StructType

        struct = StructType()
        for c in self.columns:
            struct.add(c.name, spark_type(KINDS[c.kind].raw))
        for name, ddl in extra:
            struct.add(name, spark_type(ddl))
        return struct

    def image_struct(self) -> StructType:
        """A change-feed image's fields for the data columns (other keys are ignored)."""
        from pyspark.sql.types import StructType

        struct = StructType()
        for c in self.columns:
            struct.add(c.name, spark_type(KINDS[c.kind].image))
        return struct

    def to_lake(self) -> list[Column]:
        """The data columns of parsed raw events as lake columns."""
        from pyspark.sql import functions as F

        return [_to_lake(c.kind, F.col(c.name)).alias(c.name) for c in self.columns]

    def with_missing_values(self, parsed: DataFrame, keys: Column) -> DataFrame:
        """Parsed raw events (``raw_struct``'s columns) with each column that has a missing value
        set to it where the line lacks the field (``keys``: the line's field names): Debezium
        wrote the line before the column existed, and the source reads that row's value as the
        missing one. An explicit null stays null."""
        from pyspark.sql import functions as F

        for c in self.columns:
            if c.missing_value is not None:
                fill = self.missing_raw(c)
                parsed = parsed.withColumn(
                    c.name, F.when(F.array_contains(keys, c.name), F.col(c.name)).otherwise(fill)
                )
        return parsed

    def missing_raw(self, column: LakeColumn) -> Column:
        """A column's missing value as a raw (Debezium) field."""
        from pyspark.sql import functions as F

        value = raw_missing_value(column, self.table)
        return F.lit(value).cast(KINDS[column.kind].raw)

    def missing_lake(self, column: LakeColumn) -> Column:
        """A column's missing value as the lake holds it."""
        return _to_lake(column.kind, self.missing_raw(column))

    def from_image(self, image_columns: Sequence[str]) -> list[Column]:
        """An image's columns (``image_columns``: what the image struct holds) as lake columns."""
        from pyspark.sql import functions as F

        kinds = {c.name: c.kind for c in self.columns}
        out = []
        for name in image_columns:
            kind = kinds.get(name)
            col = F.col(name)
            if kind == "date":
                col = F.date_from_unix_date(col)
            elif kind in TIMESTAMP_KINDS:
                col = F.timestamp_micros(col)
            out.append(col.alias(name))
        return out

    def timestamp_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.kind == "timestamptz")


def schema_json(schema: LakeSchema) -> str:
    return json.dumps(schema.to_json(), sort_keys=True)
