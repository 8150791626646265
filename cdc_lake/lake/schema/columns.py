"""One column of a captured table: its kind, the column as the source declares it and as the lake
holds it, and the errors that stop a refresh over the columns.

Kinds
    Each PostgreSQL type maps to a kind (``PG_KINDS``), which fixes how Debezium writes the value
    in a raw JSON line (ExtractNewRecordState, ``decimal.handling.mode=string``, adaptive time
    precision), the lake column's Spark type, how the change feed's JSON images hold it, and its
    text in the digest (``cdc_lake/lake/digest.py``). A type with no kind stops the refresh
    (``UnsupportedColumnError``) rather than land as something else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


class SchemaChangeError(ValueError):
    """The source's columns changed in a way the lake cannot take; nothing was committed."""


class UnsupportedColumnError(SchemaChangeError):
    """A source column whose type has no kind (so no lake type) yet."""


@dataclass(frozen=True)
class Kind:
    """How one kind of column travels. Types are Spark's ``simpleString`` names."""

    name: str
    raw: str  # the JSON field as Debezium writes it
    lake: str  # the lake column
    image: str  # the field in the change feed's JSON images


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        # Every integer width as bigint, so widening smallint -> integer -> bigint at the
        # source changes nothing in the lake.
        Kind("int", "bigint", "bigint", "bigint"),
        Kind("bool", "boolean", "boolean", "boolean"),
        Kind("text", "string", "string", "string"),
        # bpchar: blank padded in PostgreSQL, trimmed in the lake and the digest.
        Kind("trimmed", "string", "string", "string"),
        # A text column hashed by the source connector (CapturedTable.hashed): the hex of a
        # salted SHA-256, compared by the digest with the same hash computed in PostgreSQL.
        Kind("hashed", "string", "string", "string"),
        # jsonb as PostgreSQL prints it, which is what Debezium sends and the lake keeps.
        Kind("json", "string", "string", "string"),
        # decimal.handling.mode=string: the exact text, kept as text.
        Kind("decimal", "string", "string", "string"),
        # io.debezium.time.Date: days since 1970-01-01.
        Kind("date", "int", "date", "int"),
        # io.debezium.time.ZonedTimestamp: ISO-8601 text; images hold microseconds.
        Kind("timestamptz", "string", "timestamp", "bigint"),
        # Every float as double, as every integer is a bigint. real is parsed as a float, so
        # "1.1" (what Debezium writes for real's 1.1) becomes the real's exact value as a double,
        # which is what PostgreSQL's real::float8 gives; double precision is parsed as a double.
        Kind("float4", "float", "double", "double"),
        Kind("float8", "double", "double", "double"),
        # timestamp without time zone, by its precision (Debezium's adaptive mode): up to 3,
        # io.debezium.time.Timestamp (milliseconds), else MicroTimestamp (microseconds), of the
        # wall-clock time read as UTC. The lake holds that instant, as Hudi's Debezium sources
        # do (Avro timestamp-micros); the digest compares its microseconds.
        Kind("timestamp_ms", "bigint", "timestamp", "bigint"),
        Kind("timestamp_us", "bigint", "timestamp", "bigint"),
        # time without time zone, by its precision as above: up to 3, io.debezium.time.Time
        # (milliseconds since midnight, int32), else MicroTime (microseconds). Spark has no time
        # type: the lake holds microseconds since midnight, as Hudi's Debezium sources do (Avro
        # time-micros as a long), and the digest compares them.
        Kind("time_ms", "int", "bigint", "bigint"),
        Kind("time_us", "bigint", "bigint", "bigint"),
    )
}

# A value of each kind, as Debezium writes it in a raw line: for lines written by hand (the lake
# server's warm-up, the tests and benchmarks), for columns a line is not given.
KIND_VALUES: dict[str, Any] = {
    "int": 0, "bool": False, "text": "x", "trimmed": "X", "hashed": "0" * 64, "json": "{}",
    "decimal": "0", "date": 0, "timestamptz": "2026-01-01T00:00:00Z", "float4": 0.0,
    "float8": 0.0, "timestamp_ms": 0, "timestamp_us": 0, "time_ms": 0, "time_us": 0,
}  # fmt: skip

# Kinds that share a text in the digest and a conversion from change-feed images.
FLOAT_KINDS = frozenset({"float4", "float8"})
TIMESTAMP_KINDS = frozenset({"timestamptz", "timestamp_ms", "timestamp_us"})
TIME_KINDS = frozenset({"time_ms", "time_us"})

# PostgreSQL type names (format_type's, and the DDL's aliases) to kinds.
PG_KINDS = {
    "smallint": "int", "int2": "int", "integer": "int", "int": "int", "int4": "int",
    "bigint": "int", "int8": "int",
    "boolean": "bool", "bool": "bool",
    "text": "text", "character varying": "text", "varchar": "text", "uuid": "text",
    "character": "trimmed", "char": "trimmed", "bpchar": "trimmed",
    "json": "json", "jsonb": "json",
    "numeric": "decimal", "decimal": "decimal",
    "date": "date",
    "timestamp with time zone": "timestamptz", "timestamptz": "timestamptz",
    "real": "float4", "float4": "float4",
    "double precision": "float8", "float8": "float8", "float": "float8",
    "timestamp without time zone": "timestamp_us", "timestamp": "timestamp_us",
    "time without time zone": "time_us", "time": "time_us",
}  # fmt: skip


@dataclass(frozen=True)
class SourceColumn:
    """A column as the source declares it; ``pg_type`` as ``format_type`` prints it."""

    name: str
    pg_type: str
    nullable: bool = True
    # PostgreSQL's attnum: kept by a rename, never reused after a drop (None: not from a catalog)
    position: int | None = None
    # PostgreSQL's text of the value that rows stored before the column was added read as
    # (``ADD COLUMN ... DEFAULT`` with a non-volatile default: the catalog's attmissingval).
    missing_value: str | None = None
    # Hashed by the source connector (``cdc_lake/lake/schema/policy.py``): its kind is "hashed".
    hashed: bool = False

    @property
    def base_type(self) -> str:
        return re.sub(r"\s*\(.*\)", "", self.pg_type.strip().lower())

    @property
    def precision(self) -> int | None:
        """The type's first argument, ``float(p)``'s or ``timestamp(p)``'s; None without one."""
        found = re.search(r"\((\d+)", self.pg_type)
        return int(found.group(1)) if found else None

    @property
    def kind(self) -> str | None:
        kind = PG_KINDS.get(self.base_type)
        if self.hashed and kind == "text":
            return "hashed"
        p = self.precision
        if self.base_type == "float":  # float(p): real up to 24 bits of precision
            return "float4" if p is not None and p <= 24 else "float8"
        if kind == "timestamp_us" and p is not None and p <= 3:
            return "timestamp_ms"
        if kind == "time_us" and p is not None and p <= 3:
            return "time_ms"
        return kind


@dataclass(frozen=True)
class LakeColumn:
    """A data column of the lake table. ``source_type`` is None once the source dropped it."""

    name: str
    kind: str
    source_type: str | None
    position: int | None = None  # the source column's attnum, when read from the catalog
    # The source's missing value (``SourceColumn.missing_value``) when the lake took the column:
    # what a change event written before the column existed (it lacks the field) stands for.
    missing_value: str | None = None

    @property
    def dropped(self) -> bool:
        return self.source_type is None

    @property
    def lake_type(self) -> str:
        return KINDS[self.kind].lake


def lake_column(column: SourceColumn, table: str) -> LakeColumn:
    kind = column.kind
    if kind is None:
        raise UnsupportedColumnError(
            f"{table}: column {column.name!r} has type {column.pg_type}, which cdc-lake cannot "
            f"carry to the lake yet (supported: {', '.join(sorted(set(PG_KINDS)))}). Nothing was "
            f"committed. Way forward: drop the column, change its type at the source, or leave "
            "it out of the captured table."
        )
    return LakeColumn(column.name, kind, column.pg_type, column.position, column.missing_value)
