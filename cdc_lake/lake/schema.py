"""A captured table's columns: read from the source, evolved into the lake, and everything that
follows from them. The one home of a table's columns.

Where the columns come from
    PostgreSQL's catalog (``columns_from_catalog``): the lake asset reads it at every refresh
    and passes it to the upsert app, locally and on EMR. Without a database (unit tests,
    benchmarks) the table's ``CREATE TABLE`` in ``sql/`` is read instead (``columns_from_ddl``);
    a test on the real stack checks that both agree. Nothing else lists a table's columns.

Kinds
    Each PostgreSQL type maps to a kind (``PG_KINDS``), which fixes how Debezium writes the value
    in a raw JSON line (ExtractNewRecordState, ``decimal.handling.mode=string``, adaptive time
    precision), the lake column's Spark type, how the change feed's JSON images hold it, and its
    text in the digest (``cdc_lake/lake/digest.py``). A type with no kind stops the refresh
    (``UnsupportedColumnError``) rather than land as something else.

Evolution (``evolve``), following what Hudi's Spark writer takes
    - A column added at the source is added to the lake, nullable: rows written before read as
      null. The lake's column order is kept and new columns go at the end.
    - A column added with a non-volatile default: PostgreSQL reads every row stored before
      as that value (the catalog's ``attmissingval``) and sends no change for them. The lake
      records it as the column's ``missing_value``: a raw line without the field (written
      before the column existed) carries it, and the commit that takes the column gives it to
      every live row already in the lake (``to_backfill``). A volatile default (``random()``,
      ``clock_timestamp()``) makes PostgreSQL rewrite the table, again without change events:
      nothing in the catalog tells, and ``matches_source`` fails on those rows until they
      change or the table is snapshotted again (``cdc-lake source resnapshot``).
    - Widening an integer (``smallint`` to ``integer`` to ``bigint``) goes through: the lake
      holds every integer as ``bigint``.
    - The lake holds every float as ``double``; ``real`` to ``double precision`` stops, like any
      other change between types of one lake type (text to jsonb): PostgreSQL converts each
      stored value exactly (real's 1.1 becomes 1.100000023841858), but the raw files hold
      real's text ("1.1"), which read as a double is another value, and a line does not say
      which type wrote it; a replay would then change the rows.
    - A column dropped at the source stays in the lake, null from then on (a lake keeps
      history); the ``schema_matches_source`` check names it with WARN severity.
    - Anything else (a type narrowed or changed, a key column changed, a column renamed: the
      catalog's ``attnum`` stays with a renamed column) raises ``SchemaChangeError`` before
      anything is written: it names the table, the column, the old and new types, and the way
      forward. Nothing is half-committed and no value is coerced. Hudi's own writer would not
      stop all of these: measured on 1.1.1, it turns an ``int`` column into ``string`` when a
      batch sends text, and a ``bigint`` key into ``double`` (so every key is written again as
      "2.0": duplicates), without a word. It rejects only what it cannot convert (boolean to
      int) and a batch that lacks a column, so the batch always carries every lake column, null
      where the source has none.
    The evolved columns and a schema version (one more at each change) go into the Hudi commit's
    extra metadata (``SCHEMA_KEY``), atomically with the data, as the checkpoint does.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any

from cdc_lake.source.captured import key_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

# Options starting with "_" become the Hudi commit's extra metadata.
SCHEMA_KEY = "_cdc_lake.schema"


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

# A kind changed into another of the same lake type where every value carries over as it is:
# numeric's exact text (decimal.handling.mode=string) is the text PostgreSQL casts it to.
KIND_CHANGES: set[tuple[str, str]] = {("decimal", "text")}

# A lake type changed into another: only these widenings (Hudi promotes the stored values). The
# integer widenings need none: every integer is a bigint in the lake.
WIDENINGS: set[tuple[str, str]] = {("int", "bigint")}


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


@dataclass(frozen=True)
class LakeSchema:
    """The lake table's data columns (lake order) and its schema version."""

    table: str  # the source table, schema-qualified: named in errors
    # The record key: one column, or several (a composite key), in the declaration's order.
    keys: tuple[str, ...]
    columns: tuple[LakeColumn, ...]
    version: int = 1

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def live(self) -> tuple[LakeColumn, ...]:
        """The columns the source still has: what the digest covers."""
        return tuple(c for c in self.columns if not c.dropped)

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


@cache
def spark_type(ddl: str) -> DataType:
    """The Spark type a DDL type name (``bigint``, ``decimal(10,2)``) stands for. PySpark parses
    it in the JVM, about 10 ms a call (it tries the text as a schema first and fails), and a
    struct of the outbox's columns takes some thirty: cached, as the names are few and a type
    holds no JVM state."""
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(ddl)


def _to_lake(kind: str, col: Column) -> Column:
    """A raw field of ``kind`` as the lake column."""
    from pyspark.sql import functions as F

    if kind == "trimmed":
        return F.trim(col)
    if kind == "date":
        return F.date_from_unix_date(col)
    if kind == "timestamptz":
        # try_: null, not an ANSI-mode failure; parsing has already rejected bad text.
        return F.try_to_timestamp(col)
    if kind == "float4":
        return col.cast("double")  # exact: every float is a double
    if kind == "timestamp_ms":
        return F.timestamp_millis(col)
    if kind == "timestamp_us":
        return F.timestamp_micros(col)
    if kind == "time_ms":
        return col.cast("bigint") * 1000
    return col


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


def initial(table: str, key: str | Sequence[str], source: Sequence[SourceColumn]) -> LakeSchema:
    """The schema of a table about to be created from these source columns."""
    keys = key_columns(key)
    for k in keys:
        if not any(c.name == k for c in source):
            raise SchemaChangeError(f"{table}: the source has no key column {k!r}")
        key_kind = next(c for c in source if c.name == k).kind
        if key_kind in FLOAT_KINDS:
            raise SchemaChangeError(
                f"{table}: the key column {k!r} is a float, which cdc-lake does not take as a "
                "key (a float's equality is not its text's). Way forward: key the table by an "
                "integer or text column."
            )
    return LakeSchema(table, keys, tuple(lake_column(c, table) for c in source))


def _kind_of_lake_type(spark_type: str) -> str:
    """A lake column with no recorded kind (a table written before the schema was recorded)."""
    by_type = {"int": "int", "bigint": "int", "boolean": "bool", "date": "date",
               "timestamp": "timestamptz", "string": "text", "double": "float8"}  # fmt: skip
    return by_type.get(spark_type, "text")


def from_lake_types(
    table: str, key: str | Sequence[str], lake_types: Mapping[str, str]
) -> LakeSchema:
    """The schema of a table that recorded none (written before schemas were recorded), from
    its columns' Spark types; their source types are unknown, so taken as the lake's."""
    return LakeSchema(
        table,
        key_columns(key),
        tuple(LakeColumn(n, _kind_of_lake_type(t), t) for n, t in lake_types.items()),
    )


def evolve(
    table: str,
    key: str | Sequence[str],
    source: Sequence[SourceColumn],
    lake_types: Mapping[str, str] | None,
    recorded: LakeSchema | None = None,
) -> LakeSchema:
    """The lake's schema after taking the source's columns (see the module docstring).

    ``lake_types``: the existing lake table's data columns (lake order) and their Spark types,
    None for a table not created yet. ``recorded``: the schema the newest commit recorded, if
    any, for the kinds of dropped columns and the version. Raises ``SchemaChangeError``.
    """
    if lake_types is None:
        return initial(table, key, source)
    keys = key_columns(key)
    if recorded is not None and recorded.keys != keys:
        # Hudi's record key is the key's columns in order: another key, or the same columns in
        # another order, would make every row a new record beside its old one.
        raise SchemaChangeError(
            f"{table}: the declared key ({', '.join(keys)}) is not the one the lake table was "
            f"written with ({', '.join(recorded.keys)}). Nothing was committed. Way forward: "
            "declare the key as it was (cdc_lake/source/captured.py), or replay the raw files "
            "into a new table (LakeResource(table_prefix=...) and `cdc-lake lake replay "
            "--from-offset 0`)."
        )
    for gone in (k for k in keys if not any(c.name == k for c in source)):
        raise SchemaChangeError(
            f"{table}: the key column {gone!r} is gone from the source. Nothing was committed. "
            "Way forward: restore the column, or replay the raw files into a new table "
            "(LakeResource(table_prefix=...) and `cdc-lake lake replay --from-offset 0`)."
        )
    by_name = {c.name: c for c in source}
    known = {c.name: c for c in recorded.columns} if recorded else {}
    # A rename keeps the column's attnum: a new name at a live column's position is one.
    renamed_from = {c.position: c.name for c in known.values() if c.position and not c.dropped}
    for c in source:
        old = renamed_from.get(c.position) if c.position else None
        if old and old != c.name and old not in by_name:
            raise SchemaChangeError(
                f"{table}: column {old!r} was renamed to {c.name!r}, which the lake cannot "
                "take: its rows would keep their values under the old name and the new one "
                "would be null until each row changes. Nothing was committed and the table is "
                f"unchanged. Way forward: rename it back; or add {c.name!r} as a new column, "
                f"copy the values over (UPDATE ... SET {c.name} = {old}) and drop {old!r}; or "
                "replay the raw files into a new table (LakeResource(table_prefix=...) and "
                "`cdc-lake lake replay --from-offset 0`)."
            )
    columns: list[LakeColumn] = []
    for name, lake_type in lake_types.items():
        src = by_name.get(name)
        if src is None:
            kind = known[name].kind if name in known else _kind_of_lake_type(lake_type)
            columns.append(LakeColumn(name, kind, None))
            continue
        new = lake_column(src, table)
        old_kind = known[name].kind if name in known else None
        same_text = (old_kind, new.kind) in KIND_CHANGES
        if new.lake_type == lake_type and old_kind not in (None, new.kind) and not same_text:
            raise SchemaChangeError(
                f"{table}: column {name!r} changed type from {known[name].source_type} to "
                f"{src.pg_type}, which the lake cannot take: both are {lake_type} in the lake, "
                "but the values may not carry over exactly (the source converted every stored "
                "value, and the raw files hold the old type's values, which a replay would read "
                "as the new type). Nothing was committed and "
                "the table is unchanged. Way forward: change the column back at the source, or "
                "add the new type as a new column."
            )
        if new.lake_type != lake_type:
            widening = (lake_type, new.lake_type) in WIDENINGS
            if not widening or name in keys:
                old = known[name].source_type if name in known else None
                raise SchemaChangeError(
                    f"{table}: column {name!r} changed type from {old or lake_type} "
                    f"(lake: {lake_type}) to {src.pg_type} (lake: {new.lake_type}), which the "
                    "lake cannot take"
                    + (" on its key column" if name in keys else "")
                    + ". Nothing was committed and the table is unchanged. Way forward: change "
                    "the column back at the source, or add the new type as a new column; or "
                    "replay the raw files into a new table (LakeResource(table_prefix=...) and "
                    "`cdc-lake lake replay --from-offset 0`)."
                )
        # The missing value is the source's when the lake takes the column (again, after a
        # drop); after that the recorded one, which a table rewrite at the source clears.
        readded = name in known and _readded(known[name], src)
        kept = known[name].missing_value if name in known else None
        columns.append(replace(new, missing_value=new.missing_value if readded else kept))
    columns += [lake_column(c, table) for c in source if c.name not in lake_types]
    evolved = LakeSchema(table, keys, tuple(columns))
    if recorded is not None:
        changed = recorded.columns != evolved.columns
    else:
        changed = any(c.dropped for c in columns) or [
            (c.name, c.lake_type) for c in columns
        ] != list(lake_types.items())
    version = (recorded.version if recorded else 1) + int(changed)
    return LakeSchema(table, keys, evolved.columns, version)


def _readded(recorded: LakeColumn, now: SourceColumn | LakeColumn) -> bool:
    """Dropped and added again at the source: the lake saw the drop, or the column's attnum
    moved (PostgreSQL never reuses one)."""
    known = recorded.position is not None and now.position is not None
    return recorded.dropped or (known and recorded.position != now.position)


def to_backfill(
    lake_types: Mapping[str, str] | None, recorded: LakeSchema | None, evolved: LakeSchema
) -> tuple[LakeColumn, ...]:
    """The columns whose stored rows change without a change event, so every live row the lake
    holds gets the column's missing value (null without one) in the commit that takes them:
    a column added with a missing value (the source's rows stored before read it), and a
    column added again after a drop (its old values are gone at the source)."""
    if lake_types is None:
        return ()
    before = {c.name: c for c in recorded.columns} if recorded else {}
    return tuple(
        c
        for c in evolved.live
        if (c.missing_value is not None and c.name not in lake_types)
        or (c.name in before and _readded(before[c.name], c))
    )


def not_in_table(
    lake_types: Mapping[str, str] | None, evolved: LakeSchema
) -> tuple[LakeColumn, ...]:
    """The live columns an existing table does not have yet: added at the source since its last
    commit (none for a table not written yet)."""
    if lake_types is None:
        return ()
    return tuple(c for c in evolved.live if c.name not in lake_types)


def raw_missing_value(column: LakeColumn, table: str) -> Any:
    """A column's missing value as Debezium would write it in a raw line (see ``KINDS``)."""
    text, kind = column.missing_value, column.kind
    if text is None:
        return None  # a column added again without a default: null
    try:
        if kind == "int":
            return int(text)
        if kind == "bool":
            return {"t": True, "f": False}[text]
        if kind in FLOAT_KINDS:
            return float(text)
        if kind == "date":
            return (datetime.date.fromisoformat(text) - _EPOCH.date()).days
        if kind == "timestamptz":
            instant = datetime.datetime.fromisoformat(text).astimezone(datetime.UTC)
            return instant.isoformat().replace("+00:00", "Z")
        if kind in ("timestamp_ms", "timestamp_us"):
            micros = (datetime.datetime.fromisoformat(text) - _EPOCH) // _MICROSECOND
            return micros // 1000 if kind == "timestamp_ms" else micros
        if kind in TIME_KINDS:
            micros = _micros_since_midnight(text)
            return micros // 1000 if kind == "time_ms" else micros
    except (ValueError, KeyError) as e:
        raise SchemaChangeError(
            f"{table}: column {column.name!r} was added with the default {text!r}, which rows "
            f"stored before read but cdc-lake cannot carry to the lake as {column.source_type} "
            f"({e}). Nothing was committed. Way forward: UPDATE ... SET {column.name} = "
            f"{column.name} on every row, so each row's change event carries its value, then "
            "rewrite the table (VACUUM FULL), which clears the default that rows stored before "
            "read (the catalog's attmissingval) and with it this conversion."
        ) from e
    return text  # text, bpchar (trimmed on the way in), jsonb's and numeric's exact text


_EPOCH = datetime.datetime(1970, 1, 1)
_MICROSECOND = datetime.timedelta(microseconds=1)
_DAY_MICROS = 86_400_000_000


def _micros_since_midnight(text: str) -> int:
    """A ``time``'s text as microseconds since midnight. PostgreSQL's 24:00:00 is the day's
    end, which Debezium sends as 86,400,000,000 (DBZ-1164) and Python's time cannot hold."""
    if re.fullmatch(r"24:00(:00(\.0*)?)?", text):
        return _DAY_MICROS
    clock = datetime.datetime.combine(_EPOCH, datetime.time.fromisoformat(text))
    return (clock - _EPOCH) // _MICROSECOND


# Reading the source's columns


def columns_from_catalog(conn: Any, table: str) -> list[SourceColumn]:
    """The columns of ``schema.table`` in PostgreSQL's catalog, in attribute order."""
    schema, name = table.split(".", 1)
    with conn.cursor() as cur:
        cur.execute(
            """
            SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull, a.attnum,
                   CASE WHEN a.atthasmissing THEN (a.attmissingval::text::text[])[1] END
            FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY a.attnum
            """,
            (schema, name),
        )
        rows = cur.fetchall()
    if not rows:
        raise SchemaChangeError(f"{table}: no such table in the source database")
    # psycopg2 sets DateStyle ISO on every connection: dates and times print as ISO 8601.
    return [
        SourceColumn(str(n), str(t), bool(null), int(pos), missing)
        for n, t, null, pos, missing in rows
    ]


_CREATE = re.compile(
    r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<name>[\w.]+)\s*\((?P<body>.*?)\)\s*;",
    re.IGNORECASE | re.DOTALL,
)


def columns_from_ddl(sql: str, table: str) -> list[SourceColumn]:
    """The columns of ``table`` (``schema.name``; the DDL may leave the schema to its
    search_path) as its ``CREATE TABLE`` in ``sql`` declares them."""
    name = table.split(".")[-1]
    for m in _CREATE.finditer(sql):
        if m.group("name").split(".")[-1] != name:
            continue
        out = []
        for part in _split_top_level(m.group("body")):
            words = part.split()
            if not words or words[0].upper() in ("PRIMARY", "UNIQUE", "CONSTRAINT", "CHECK"):
                continue
            type_words = []
            for w in words[1:]:
                if w.upper() in ("NOT", "NULL", "PRIMARY", "DEFAULT", "REFERENCES", "UNIQUE"):
                    break
                type_words.append(w)
            nullable = "NOT NULL" not in part.upper() and "PRIMARY KEY" not in part.upper()
            out.append(SourceColumn(words[0], " ".join(type_words), nullable))
        return out
    raise SchemaChangeError(f"{table}: no CREATE TABLE for it in the SQL")


def _split_top_level(body: str) -> list[str]:
    body = re.sub(r"--[^\n]*", "", body)
    parts, depth, current = [], 0, []
    for ch in body:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def schema_json(schema: LakeSchema) -> str:
    return json.dumps(schema.to_json(), sort_keys=True)


@dataclass(frozen=True)
class SchemaDiff:
    """How the lake's columns stand against the source's now."""

    missing: tuple[str, ...]  # at the source, not (yet) in the lake
    changed: tuple[str, ...]  # in both, but the source's type is not the one the lake took
    dropped: tuple[str, ...]  # kept in the lake, gone from the source

    @property
    def equal(self) -> bool:
        return not (self.missing or self.changed or self.dropped)


def compare(source: Sequence[SourceColumn], lake: LakeSchema) -> SchemaDiff:
    names = {c.name for c in lake.columns}
    taken = {c.name: c.source_type for c in lake.columns if not c.dropped}
    src = {c.name: c.pg_type for c in source}
    return SchemaDiff(
        missing=tuple(c.name for c in source if c.name not in names),
        changed=tuple(
            f"{n}: {taken[n]} -> {t}" for n, t in src.items() if n in taken and taken[n] != t
        ),
        dropped=tuple(c.name for c in lake.columns if c.name not in src),
    )


def describe_change(old: LakeSchema | None, new: LakeSchema) -> str | None:
    """What changed from ``old`` to ``new``, in a line; None when nothing did."""
    if old is None or old.columns == new.columns:
        return None
    before = {c.name: c for c in old.columns}
    parts = []
    for c in new.columns:
        was = before.get(c.name)
        if was is None:
            parts.append(f"added {c.name} ({c.source_type})")
        elif c.dropped and not was.dropped:
            parts.append(f"{c.name} dropped at the source, kept")
        elif was.dropped and not c.dropped:
            parts.append(f"{c.name} back at the source ({c.source_type})")
        elif was.source_type != c.source_type:
            parts.append(f"{c.name} {was.source_type} -> {c.source_type}")
    return f"schema v{old.version} -> v{new.version}: " + "; ".join(parts or ["columns recorded"])
