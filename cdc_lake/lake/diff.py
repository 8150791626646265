"""Which rows differ, when the digests say that some do: the keys and the columns that
``matches_source`` names.

Why
    The digest (``cdc_lake/lake/digest.py``) tells which buckets differ and how (keys or
    content) without reading a row. To say what to repair, the check needs the rows: which keys
    the lake lacks, which it holds and the source does not, and which columns of a stale row
    differ.

How
    Only the first ``MAX_BUCKETS`` differing buckets are read (a few keys are what a user
    needs; the counts say how many rows differ in them). The source side is one ``COPY`` of
    those buckets' rows (``write_source_rows``): per row, the key's text as hex (the one the
    reconcile compares, ``cdc_lake/lake/reconcile.py``), the row hash and one hash per
    column, in the digest's canonical text. The lake side (``differences``, in Spark) computes
    the same for its live rows in those buckets and joins by key: a key on one side only is
    missing or extra; a key on both with another row hash is stale, and the column hashes that
    differ name its columns. Equal rows give equal hashes on both sides, by the digest's
    construction, so a row reported here differs.

When
    Only for a check that found a difference with nothing pending (caught up): it costs one
    read of the lake table and a scan of the source, and runs on the lake's Spark (the lake
    server, in process, or EMR). It changes nothing.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_lake.lake.digest import (
    column_salt,
    hashed_columns,
    spark_field_hashes,
    spark_key_number,
    spark_row_hash,
    sql_field_hashes,
    sql_key_number,
    sql_row_hash,
)
from cdc_lake.lake.reconcile import key_of_hex, key_text_sql, spark_key_hex

if TYPE_CHECKING:
    from psycopg2 import sql
    from psycopg2.extensions import connection as PgConnection
    from pyspark.sql import DataFrame, SparkSession

    from cdc_lake.lake.schema import LakeSchema

MAX_BUCKETS = 4  # differing buckets read, the lowest first
SAMPLE = 5  # keys named per kind of difference
KINDS = ("missing", "extra", "stale")  # in the lake: lacks / holds beyond the source / differs


@dataclass(frozen=True)
class RowDifferences:
    """What differs in the buckets read: per kind, how many rows and the first keys (each a
    tuple of its columns' texts); per stale key shown, its differing columns."""

    buckets: tuple[int, ...]
    counts: dict[str, int]
    keys: dict[str, list[tuple[str, ...]]]
    columns: dict[tuple[str, ...], list[str]]

    def to_json(self) -> dict[str, Any]:
        return {
            "buckets": list(self.buckets),
            "counts": self.counts,
            "keys": {kind: [list(k) for k in keys] for kind, keys in self.keys.items()},
            "columns": [[list(k), cols] for k, cols in self.columns.items()],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RowDifferences:
        return cls(
            tuple(int(b) for b in data["buckets"]),
            {k: int(v) for k, v in data["counts"].items()},
            {kind: [tuple(k) for k in keys] for kind, keys in data["keys"].items()},
            {tuple(k): list(cols) for k, cols in data["columns"]},
        )


def buckets_to_read(differing: Sequence[int]) -> tuple[int, ...]:
    return tuple(sorted(int(b) for b in differing)[:MAX_BUCKETS])


def source_rows_sql(schema: LakeSchema, buckets: int, chosen: Sequence[int]) -> sql.Composed:
    """The source rows of the ``chosen`` buckets: key hex, row hash, column hashes (tab
    separated, as ``COPY`` writes text)."""
    from psycopg2 import sql  # here: the Spark apps, which import this module, have no driver

    schema_name, _, table = schema.table.rpartition(".")
    wanted = ", ".join(str(int(b)) for b in chosen)
    number = sql_key_number(schema)
    query = sql.SQL(
        "COPY (SELECT {key}, ({hash})::text, {fields} FROM {table} "
        "WHERE mod(mod({number}, {n}) + {n}, {n}) IN ({wanted})) TO STDOUT"
    )
    return query.format(
        key=key_text_sql(schema),
        hash=sql.SQL(sql_row_hash(schema)),
        fields=sql.SQL(sql_field_hashes(schema)),
        table=sql.Identifier(schema_name, table),
        number=sql.SQL(number),
        n=sql.Literal(int(buckets)),
        wanted=sql.SQL(wanted),
    )


def write_source_rows(
    conn: PgConnection,
    s3_client: Any,
    bucket: str,
    key: str,
    schema: LakeSchema,
    buckets: int,
    chosen: Sequence[int],
    salt: str | None = None,
) -> int:
    """The source rows of the ``chosen`` buckets into ``s3://bucket/key``; how many. ``salt``:
    the source connector's, for a table with hashed columns."""
    out = io.BytesIO()
    with column_salt(conn, salt, schema), conn.cursor() as cur:
        cur.copy_expert(source_rows_sql(schema, buckets, chosen).as_string(cur), out)
    conn.commit()
    body = out.getvalue()
    s3_client.put_object(Bucket=bucket, Key=key, Body=body)
    return body.count(b"\n")


def differences(
    spark: SparkSession,
    lake_rows: DataFrame,
    source_uri: str,
    schema: LakeSchema,
    buckets: int,
    chosen: Sequence[int],
) -> RowDifferences:
    """The rows of the ``chosen`` buckets that differ between the lake's live rows and the
    source's (as ``write_source_rows`` wrote them to ``source_uri``)."""
    from pyspark.sql import functions as F

    for c in schema.live:  # a column the source added that no commit has written yet
        if c.name not in lake_rows.columns:
            lake_rows = lake_rows.withColumn(c.name, F.lit(None).cast(c.lake_type))
    bucket = F.pmod(spark_key_number(schema), F.lit(buckets)).cast("int")
    lake = (
        lake_rows.where(bucket.isin([int(b) for b in chosen]))
        .select(
            spark_key_hex(schema).alias("_key_hex"),
            spark_row_hash(schema).cast("string").alias("_lake_hash"),
            spark_field_hashes(schema).alias("_lake_fields"),
        )
    )
    parts = F.split(F.col("value"), "\t")
    source = spark.read.text(source_uri).select(
        F.lower(parts.getItem(0)).alias("_key_hex"),
        parts.getItem(1).alias("_source_hash"),
        parts.getItem(2).alias("_source_fields"),
    )
    kind = (
        F.when(F.col("_lake_hash").isNull(), F.lit("missing"))
        .when(F.col("_source_hash").isNull(), F.lit("extra"))
        .when(F.col("_lake_hash") != F.col("_source_hash"), F.lit("stale"))
    )
    differing = (
        lake.join(source, "_key_hex", "full_outer")
        .withColumn("_kind", kind)
        .where(F.col("_kind").isNotNull())
        .cache()
    )
    try:
        counts = {r["_kind"]: int(r["count"]) for r in differing.groupBy("_kind").count().collect()}
        shown: dict[str, list[Any]] = {
            k: differing.where(F.col("_kind") == k).orderBy("_key_hex").limit(SAMPLE).collect()
            for k in KINDS
            if counts.get(k)
        }
    finally:
        differing.unpersist()
    names = hashed_columns(schema)
    columns = {
        key_of_hex(r["_key_hex"]): [
            name
            for name, a, b in zip(
                names, r["_lake_fields"].split(","), r["_source_fields"].split(","), strict=True
            )
            if a != b
        ]
        for r in shown.get("stale", [])
    }
    return RowDifferences(
        tuple(int(b) for b in chosen),
        {k: counts.get(k, 0) for k in KINDS},
        {k: [key_of_hex(r["_key_hex"]) for r in rows] for k, rows in shown.items()},
        columns,
    )


def _key_text(schema_keys: Sequence[str], key: tuple[str, ...]) -> str:
    if len(schema_keys) == 1:
        return f"{schema_keys[0]}={key[0]}"
    return f"({', '.join(schema_keys)})=({', '.join(key)})"


def describe(found: RowDifferences, keys: Sequence[str], table: str, of_buckets: int) -> str:
    """What differs and the command that repairs each kind, for the check's description."""
    where = (
        f"in the {len(found.buckets)} bucket(s) read of {of_buckets} differing"
        if of_buckets > len(found.buckets)
        else f"in {of_buckets} differing bucket(s)"
    )
    resnapshot = f"`cdc-lake source resnapshot --table {table} --all`"
    repair = {
        "missing": ("the lake lacks", resnapshot),
        "extra": ("the source no longer has", f"`cdc-lake lake reconcile --table {table}`"),
        "stale": ("stale in the lake", resnapshot),
    }
    parts = []
    for kind in KINDS:
        n = found.counts.get(kind, 0)
        if not n:
            continue
        shown = []
        for key in found.keys.get(kind, []):
            text = _key_text(keys, key)
            if kind == "stale" and found.columns.get(key):
                text += f" ({', '.join(found.columns[key])})"
            shown.append(text)
        more = f" and {n - len(shown)} more" if n > len(shown) else ""
        what, command = repair[kind]
        parts.append(f"{n} row(s) {what}: {'; '.join(shown)}{more}. Repair: {command}")
    if not parts:
        return f"no differing row found {where} (the lake changed since its digest?)"
    return f"{where}: " + " | ".join(parts)
