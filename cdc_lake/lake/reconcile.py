"""Reconcile: the lake's live rows whose key the source no longer holds, deleted in one commit.

Why
    A row can be left in the lake with no event that would ever remove it: a ``TRUNCATE`` from
    before truncates reached the lake, a delete made while the table was out of the
    publication, a delete lost with raw files that are gone. A replay cannot help (no line
    holds the delete), nor can a resnapshot (it re-sends only the rows that exist).

The rule
    The source's keys are read in one snapshot of the database (``write_source_keys``), and
    ``ts_ms``, its start on the database's clock, is taken in the same transaction. Every live
    lake row whose key is not among them and whose latest change is older than ``ts_ms`` is
    deleted (``leftovers``), as the merge rule's sweep does for a completed Debezium snapshot
    (``cdc_lake/lake/ordering.py``): the delete is stamped just below the snapshot, so a change
    made after it (already in the lake, in the same batch, or read later) wins over it. A row
    changed after the snapshot began is never touched, so the source can go on changing while
    it runs.

Keys
    Compared as the hex of the UTF-8 bytes of their text: the integer's decimal, a bpchar's
    text trimmed of spaces (as the lake holds it), a text key as it is. So a key holding a
    newline or any other byte is compared exactly. A composite key is its columns' hex, in the
    declaration's order, joined by commas (which no hex digit is).

Idempotency
    A second run at a caught-up point finds nothing more to delete.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from psycopg2 import sql
    from psycopg2.extensions import connection as PgConnection
    from pyspark.sql import Column, DataFrame, SparkSession

    from cdc_lake.lake.schema import LakeSchema


@dataclass(frozen=True)
class SourceKeys:
    """The source's keys in one snapshot: a text object of one hex key per line, and the
    snapshot's start (ms since the epoch, the database's clock)."""

    uri: str
    ts_ms: int


def key_text_sql(schema: LakeSchema) -> sql.Composable:
    """The key's text in PostgreSQL, as hex of its UTF-8 bytes (a composite key's: each
    column's, joined by commas)."""
    from psycopg2 import sql  # here: the Spark apps, which import this module, have no driver

    def hex_of(name: str) -> sql.Composable:
        column = sql.Identifier(name)
        text = (
            sql.SQL("rtrim({}::text)").format(column) if schema.column(name).kind == "trimmed"
            else sql.SQL("{}::text").format(column)
        )  # fmt: skip
        return sql.SQL("encode(convert_to({}, 'UTF8'), 'hex')").format(text)

    return sql.SQL(" || ',' || ").join([hex_of(k) for k in schema.keys])


def write_source_keys(
    conn: PgConnection, s3_client: Any, bucket: str, key: str, uri: str, schema: LakeSchema
) -> tuple[SourceKeys, int]:
    """The source table's keys into ``s3://bucket/key`` (read by Spark as ``uri``), read in one
    REPEATABLE READ snapshot with its start time; returns them and how many there are."""
    from psycopg2 import sql

    schema_name, _, table = schema.table.rpartition(".")
    out = io.BytesIO()
    conn.commit()  # set_session needs no transaction open (reading the catalog opens one)
    conn.set_session(isolation_level="REPEATABLE READ", readonly=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT (extract(epoch FROM now()) * 1000)::bigint")
            row = cur.fetchone()
            assert row is not None
            query = sql.SQL("COPY (SELECT {} FROM {}) TO STDOUT").format(
                key_text_sql(schema), sql.Identifier(schema_name, table)
            )
            cur.copy_expert(query.as_string(cur), out)
        conn.commit()
    finally:
        conn.rollback()  # nothing open after the commit; after an error, what was
        conn.set_session(isolation_level="DEFAULT", readonly=False)
    body = out.getvalue()
    s3_client.put_object(Bucket=bucket, Key=key, Body=body)
    return SourceKeys(uri, int(row[0])), body.count(b"\n")


def spark_key_hex(schema: LakeSchema) -> Column:
    """``key_text_sql`` of a lake row, in Spark (lower-case hex)."""
    from pyspark.sql import functions as F

    return F.concat_ws(
        ",", *[F.lower(F.hex(F.encode(F.col(k).cast("string"), "UTF-8"))) for k in schema.keys]
    )


def key_of_hex(key_hex: str) -> tuple[str, ...]:
    """The key's column texts back from its hex (a byte that is not UTF-8 shows as U+FFFD)."""
    return tuple(bytes.fromhex(h).decode("utf-8", "replace") for h in key_hex.split(","))


def leftovers(
    spark: SparkSession, stored: DataFrame | None, batch: DataFrame, keys: SourceKeys,
    schema: LakeSchema,
) -> DataFrame:  # fmt: skip
    """Deletes, as lake rows (``batch``'s columns), of the live keys the source did not hold
    at ``keys.ts_ms`` and whose latest change is older (the module docstring's rule)."""
    from pyspark.sql import functions as F

    from cdc_lake.lake import ordering as O

    source = spark.read.text(keys.uri).select(F.lower(F.col("value")).alias("_key_hex"))
    key_hex = spark_key_hex(schema)

    def absent(rows: DataFrame) -> DataFrame:
        return (
            rows.withColumn("_key_hex", key_hex)
            .join(source, "_key_hex", "left_anti")
            .drop("_key_hex")
        )

    return O.swept(
        absent(stored) if stored is not None else None, absent(batch), keys.ts_ms, 0, schema.keys
    )
