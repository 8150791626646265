"""The digest of the live rows that ``matches_source`` compares: the lake's against the source's.

The one home of both sides. Spark computes it over a snapshot of the Hudi table
(``spark_digest``), PostgreSQL over the source table (``source_digest_sql``,
``source_digest``); both build the same canonical text per row from one column list, so equal
rows give bit-identical digests.

What it holds
    Each row's key number is its key where the key is an integer (the outbox's ``order_id``),
    else the first 32 bits (8 hex digits) of the md5 of the key's canonical text (below; the
    customers' ``customer_id``). Rows are grouped in buckets by key number mod ``BUCKETS``
    (non-negative remainder). Per bucket: the row count, the sum and the sum of squares of the
    key numbers (the key part), and the sum of a 60-bit row hash (the content part). Sums are
    exact integers (numeric in PostgreSQL, decimal(38,0) in Spark), so there is no rounding and
    no overflow.

What equal digests prove
    That the live rows are equal: the same keys and, for each, the same value in every
    column the source has now (a column dropped at the source and kept in the lake is left
    out; the digest names the columns it covers, and digests over other columns do not
    compare). A missing or extra key changes its bucket's count or key sums
    (reported as a key difference). A stale row under the right key changes only its bucket's
    content sum (a content difference). The row hash covers the key too, so content moved from
    one key to another is also caught.

Row hash
    The first 60 bits (15 hex digits) of the md5 of the UTF-8 bytes of the row's canonical text:
    the table's live columns (``LakeSchema.live``: the source's columns, read from its catalog;
    ``cdc_lake/lake/schema/source.py``) sorted by name, each written as
    ``<length of name>:<name><length of text>:<text>``, and a null column not written at all.
    The length prefixes make the text unambiguous whatever the fields contain; leaving nulls out
    means a column added at the source, null on every row written before, changes no earlier
    row's hash. Per kind of column, the text is:

    - ``int``, decimal;
    - ``trimmed`` (bpchar), trimmed of spaces (blank padded in PostgreSQL, trimmed on ingestion);
    - ``date``, days since 1970-01-01, decimal;
    - ``json``, the JSON text as stored: PostgreSQL's jsonb output (``col::text``), which is
      what Debezium sends and the lake keeps byte for byte;
    - ``timestamptz``, microseconds since the epoch (UTC), decimal; ``timestamp`` without time
      zone the same, its wall-clock time read as UTC; ``time`` without time zone, microseconds
      since midnight (what the lake holds), decimal;
    - ``float4`` and ``float8`` (``real``, ``double precision``; doubles in the lake), the
      IEEE 754 bits of the value as a double, as a signed 64-bit decimal: exact, where decimal
      text would depend on each side's float printing (PostgreSQL's ``float8send``; Java's
      ``Double.doubleToLongBits`` in Spark, which folds every NaN into one; PostgreSQL's NaNs
      are folded into the same);
    - ``text``, ``decimal`` (as Debezium's string), ``bool`` (``true``/``false``): the text;
    - ``hashed`` (a column the source connector hashes, ``cdc_lake/lake/schema/policy.py``): the
      lake holds the hash, and PostgreSQL computes the same from the value, the lowercase hex of
      the SHA-256 of the salt's UTF-8 bytes then the value's. The salt reaches the query as a
      session setting (``column_salt``), never in the query's text. A jsonb column with field
      policies (``<column>.<field>``): PostgreSQL applies them to the source's value first
      (the excluded fields removed, the hashed ones' strings hashed), then prints it.

    PostgreSQL hashes ``convert_to(text, 'UTF8')``, so its database encoding does not matter;
    its ``extract(epoch ...)`` is numeric (14+), so microseconds are exact.

Collisions
    Two different sets of rows have equal digests only if, in some bucket, their row hashes sum
    to the same value with the same count and key sums: about 2^-60 for an accidental change,
    and not something a lost or stale event produces. A key-set difference that keeps count, sum
    and sum of squares (at least two keys swapped for others in one bucket) is still caught by
    the content sum, but reported as a content difference.

Cost
    In full, one aggregation over the live rows: an md5 per row over its content columns;
    PostgreSQL runs one query, a full scan of the source table. Sums are additive, so the
    lake's side is kept up to date from the rows each commit changed (``add_digests``: the
    digest of the new rows plus, that of the replaced rows minus), which costs what the change
    costs; see ``cdc_lake/lake/table_state.py`` for when it is rescanned in full.

The digest travels as JSON (Pipes metadata, ``live_key_digest``: the name of the former key-only
digest): ``{"version", "buckets", "columns", "rows", "digest": {bucket: [count, key_sum,
key_square_sum, content_sum]}}``, bucket as a decimal string and ``columns`` the
``name:kind`` of the columns it covers (``LakeSchema.digest_signature``). Digests of different
versions, buckets or columns do not compare.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_lake.lake.schema import FLOAT_KINDS, TIME_KINDS, TIMESTAMP_KINDS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from cdc_lake.lake.schema import LakeSchema

BUCKETS = 64
# Bump when the canonical text changes: digests of two versions do not compare.
VERSION = 3
HASH_HEX_DIGITS = 15  # 60 bits: a non-negative bigint in both engines
KEY_HEX_DIGITS = 8  # 32 bits: a key number whose square sums stay far inside decimal(38,0)
FIELD_HEX_DIGITS = 8  # per column, to name the columns that differ (not summed)
# Double.doubleToLongBits(NaN), Java's one NaN: 0x7ff8000000000000.
JAVA_NAN_BITS = 0x7FF8000000000000
# The session setting that holds the salt of hashed columns for the digest's SQL.
SALT_SETTING = "cdc_lake.column_salt"
ROW_HASH = "_row_hash"  # optional precomputed column for spark_digest


def _fields(schema: LakeSchema) -> list[tuple[str, str]]:
    """(column, kind) of the canonical text, in its order."""
    return sorted((c.name, c.kind) for c in schema.live)


def hashed_columns(schema: LakeSchema) -> list[str]:
    """The columns the row hash covers, in the order of its canonical text (and of the field
    hashes)."""
    return [name for name, _ in _fields(schema)]


def empty_digest(buckets: int = BUCKETS, *, schema: LakeSchema) -> dict[str, Any]:
    """The digest of no rows, over the live columns of ``schema``."""
    return _digest(buckets, [], schema.digest_signature())


def _digest(
    buckets: int, rows: list[tuple[Any, Any, Any, Any, Any]], columns: list[str]
) -> dict[str, Any]:
    """The digest JSON of per-bucket sums over ``columns`` (``LakeSchema.digest_signature``)."""
    digest = {str(b): [int(n), int(s), int(q), int(c)] for b, n, s, q, c in rows}
    return {
        "version": VERSION,
        "buckets": buckets,
        "columns": list(columns),
        "rows": sum(v[0] for v in digest.values()),
        "digest": digest,
    }


def comparable(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Why two digests cannot be compared (computed differently), or None."""
    for name in ("version", "buckets", "columns"):
        if a.get(name) != b.get(name):
            return f"{name} differs"
    return None


def add_digests(
    base: dict[str, Any], plus: dict[str, Any], minus: dict[str, Any]
) -> dict[str, Any]:
    """``base`` + ``plus`` - ``minus``, bucket by bucket: the digest of a set of rows after the
    rows of ``minus`` were replaced by those of ``plus``. Empty buckets are dropped (they
    compare equal to absent ones). Raises ValueError on digests computed differently."""
    for other in (plus, minus):
        if (why := comparable(base, other)) is not None:
            raise ValueError(f"digests are not comparable: {why}")
    out = {b: [int(v) for v in values] for b, values in base["digest"].items()}
    for sign, other in ((1, plus), (-1, minus)):
        for bucket, values in other["digest"].items():
            current = out.get(bucket, [0, 0, 0, 0])
            out[bucket] = [c + sign * int(v) for c, v in zip(current, values, strict=True)]
    kept = {b: v for b, v in sorted(out.items(), key=lambda kv: int(kv[0])) if any(v)}
    return _digest(
        int(base["buckets"]),
        [(int(b), v[0], v[1], v[2], v[3]) for b, v in kept.items()],
        list(base["columns"]),
    )


# Spark


def _spark_text(name: str, kind: str) -> Column:
    from pyspark.sql import functions as F

    col = F.col(name)
    if kind == "trimmed":
        return F.trim(col)
    if kind == "date":
        return F.unix_date(col).cast("string")
    if kind in TIMESTAMP_KINDS:
        return F.unix_micros(col).cast("string")
    if kind in FLOAT_KINDS:
        bits = F.expr(f"reflect('java.lang.Double', 'doubleToLongBits', `{name}`)")
        return F.when(col.isNotNull(), bits)  # reflect is not called with a null
    return col.cast("string")


def _spark_field(name: str, text: Column) -> Column:
    from pyspark.sql import functions as F

    # concat is null if any part is: a null field is left out.
    label = f"{len(name)}:{name}"
    return F.coalesce(
        F.concat(F.lit(label), F.length(text).cast("string"), F.lit(":"), text), F.lit("")
    )


def spark_row_hash(schema: LakeSchema) -> Column:
    """The 60-bit row hash as decimal(38,0), over the live columns of lake rows."""
    from pyspark.sql import functions as F

    fields = [_spark_field(name, _spark_text(name, kind)) for name, kind in _fields(schema)]
    text = F.concat(*fields)
    prefix = F.substring(F.md5(text), 1, HASH_HEX_DIGITS)
    return F.conv(prefix, 16, 10).cast("decimal(38,0)")


def spark_key_number(schema: LakeSchema) -> Column:
    """The key number of a lake row (its bucket is this mod the number of buckets)."""
    from pyspark.sql import functions as F

    if len(schema.keys) > 1:
        # A composite key: the hash of its columns' texts, each labelled as in the row hash.
        kinds = [(k, str(schema.column(k).kind)) for k in schema.keys]
        text = F.concat(*[_spark_field(k, _spark_text(k, kind)) for k, kind in kinds])
    else:
        key = next(iter(schema.keys))
        kind = schema.column(key).kind
        if kind == "int":
            return F.col(key).cast("decimal(38,0)")
        text = _spark_text(key, kind)
    prefix = F.substring(F.md5(text), 1, KEY_HEX_DIGITS)
    return F.conv(prefix, 16, 10).cast("decimal(38,0)")


def spark_field_hashes(schema: LakeSchema) -> Column:
    """Per live column, in the canonical text's order, the first ``FIELD_HEX_DIGITS`` of the md5
    of its labelled field, joined by commas: which columns of two rows with different row
    hashes differ (``cdc_lake/lake/diff.py``). Equal to ``sql_field_hashes`` for equal rows."""
    from pyspark.sql import functions as F

    return F.concat_ws(
        ",",
        *[
            F.substring(F.md5(_spark_field(name, _spark_text(name, kind))), 1, FIELD_HEX_DIGITS)
            for name, kind in _fields(schema)
        ],
    )


def spark_digest(live: DataFrame, buckets: int = BUCKETS, *, schema: LakeSchema) -> dict[str, Any]:
    """The digest of a DataFrame of live lake rows (deleted rows already filtered out): with
    the key and either the live columns of ``schema`` (the table's) or their hash as
    ``ROW_HASH``."""
    return spark_digests(live, (), buckets, schema=schema)[()]


def spark_digests(
    rows: DataFrame,
    by: Sequence[str],
    buckets: int = BUCKETS,
    *,
    schema: LakeSchema,
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """One digest per value of the columns ``by`` (as a tuple, ``()`` for none), in one Spark
    job: rows as for ``spark_digest``."""
    from pyspark.sql import functions as F

    oid = spark_key_number(schema)
    if ROW_HASH not in rows.columns:
        # Hashed in a projection: Spark counts ``reflect`` (the float bits) as nondeterministic,
        # which an aggregate's arguments may not hold.
        rows = rows.withColumn(ROW_HASH, spark_row_hash(schema))
    row_hash = F.col(ROW_HASH)
    sums = (
        rows.groupBy(*by, F.pmod(oid, F.lit(buckets)).cast("int").alias("bucket"))
        .agg(
            F.count("*").alias("n"),
            F.sum(oid).alias("s"),
            F.sum(oid * oid).alias("q"),
            F.sum(row_hash).alias("c"),
        )
        .collect()
    )
    groups: dict[tuple[Any, ...], list[tuple[Any, Any, Any, Any, Any]]] = {}
    for r in sums:
        key = tuple(r[c] for c in by)
        groups.setdefault(key, []).append((r["bucket"], r["n"], r["s"], r["q"], r["c"]))
    columns = schema.digest_signature()
    out = {key: _digest(buckets, parts, columns) for key, parts in groups.items()}
    if not by:
        out.setdefault((), _digest(buckets, [], columns))
    return out


# PostgreSQL


def _sql_hash(text: str) -> str:
    """The source connector's hash of a text expression, in PostgreSQL."""
    salt = f"convert_to(current_setting('{SALT_SETTING}'), 'UTF8')"
    return f"encode(sha256({salt} || convert_to({text}, 'UTF8')), 'hex')"


def _sql_json(column: str, excluded: Sequence[str], hashed: Sequence[str]) -> str:
    """A jsonb column's value under its field policies, as the source connector writes it: the
    excluded fields removed, each hashed field holding a string replaced by its hash (a null or
    absent one left as it is), and nothing done to a value that is not an object. jsonb prints
    its keys in its own order whatever the construction, which is the order the connector kept
    (``connectors/.../JsonFields.java``)."""
    value = column
    if excluded:
        names = ", ".join(_sql_literal(f) for f in excluded)
        value = f"({value} - ARRAY[{names}]::text[])"
    for field in hashed:
        f = _sql_literal(field)
        hashed_value = f"jsonb_build_object({f}, {_sql_hash(f'{column} ->> {f}')})"
        value = (
            f"({value} || CASE WHEN jsonb_typeof({column} -> {f}) = 'string' "
            f"THEN {hashed_value} ELSE '{{}}'::jsonb END)"
        )
    return f"CASE WHEN jsonb_typeof({column}) = 'object' THEN {value} ELSE {column} END"


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sql_text(name: str, kind: str, schema: LakeSchema | None = None) -> str:
    column = f'"{name}"'
    if kind == "hashed":
        return _sql_hash(f"{column}::text")
    excluded, hashed = schema.field_policies(name) if schema is not None else ((), ())
    if kind == "json" and (excluded or hashed):
        return f"({_sql_json(column, excluded, hashed)})::text"
    if kind == "trimmed":
        return f"btrim({column}::text)"
    if kind == "date":
        return f"({column} - DATE '1970-01-01')::text"
    if kind in TIMESTAMP_KINDS or kind in TIME_KINDS:
        # extract returns numeric (PostgreSQL 14+): exact to the microsecond. Without a time
        # zone it counts from 1970-01-01 00:00 as written, which is how Debezium counts; a
        # time's epoch is its seconds since midnight.
        return f"(extract(epoch FROM {column}) * 1000000)::bigint::text"
    if kind in FLOAT_KINDS:
        # float8send sends a NaN's own bits (a computed one may have the sign set); Java
        # folds every NaN into 0x7ff8000000000000, so this does too.
        bits = f"(('x' || encode(float8send({column}::float8), 'hex'))::bit(64)::bigint)::text"
        return f"CASE WHEN {column}::float8 = 'NaN' THEN '{JAVA_NAN_BITS}' ELSE {bits} END"
    return f"{column}::text"


def _sql_field(name: str, text: str) -> str:
    label = f"{len(name)}:{name}".replace("'", "''")
    return f"coalesce('{label}' || length({text}) || ':' || {text}, '')"


def sql_row_hash(schema: LakeSchema) -> str:
    """The row hash as a PostgreSQL bigint expression over a source row's live columns."""
    text = "\n        || ".join(
        _sql_field(name, _sql_text(name, kind, schema)) for name, kind in _fields(schema)
    )
    return (
        f"('x' || substr(md5(convert_to(\n           {text},\n        'UTF8')), 1, "
        f"{HASH_HEX_DIGITS}))::bit({HASH_HEX_DIGITS * 4})::bigint"
    )


def sql_field_hashes(schema: LakeSchema) -> str:
    """``spark_field_hashes`` in PostgreSQL, over a source row."""
    parts = ", ".join(
        f"substr(md5(convert_to({_sql_field(name, _sql_text(name, kind, schema))}, 'UTF8')), 1, "
        f"{FIELD_HEX_DIGITS})"
        for name, kind in _fields(schema)
    )
    return f"concat_ws(',', {parts})"


def sql_key_number(schema: LakeSchema) -> str:
    """The key number of a source row, as a numeric."""
    if len(schema.keys) > 1:
        kinds = [(k, str(schema.column(k).kind)) for k in schema.keys]
        text = " || ".join(_sql_field(k, _sql_text(k, kind)) for k, kind in kinds)
    else:
        key = next(iter(schema.keys))
        kind = schema.column(key).kind
        if kind == "int":
            return f'"{key}"::numeric'
        text = _sql_text(key, str(kind))
    return (
        f"('x' || substr(md5(convert_to({text}, 'UTF8')), 1, {KEY_HEX_DIGITS}))"
        f"::bit({KEY_HEX_DIGITS * 4})::bigint::numeric"
    )


def source_digest_sql(table: str | None = None, *, schema: LakeSchema) -> str:
    """The digest query over ``table`` (by default the schema's source table), hashing the
    live columns of ``schema``; parameter ``buckets``."""
    return f"""
SELECT mod(mod(k, %(buckets)s) + %(buckets)s, %(buckets)s) AS bucket, count(*),
       sum(k), sum(k * k), sum(h::numeric)
FROM (
    SELECT {sql_key_number(schema)} AS k, {sql_row_hash(schema)} AS h
    FROM {table or schema.table}
) AS hashed
GROUP BY 1
"""


def source_digest(
    conn: Any,
    buckets: int = BUCKETS,
    table: str | None = None,
    *,
    schema: LakeSchema,
    salt: str | None = None,
) -> dict[str, Any]:
    """Run the digest query on a psycopg2 connection. Every row of the source is live.
    ``schema``: the table's, whose live columns are hashed (``table``: by default its source
    table). ``salt``: the source connector's, for a table with hashed columns."""
    with column_salt(conn, salt, schema), conn.cursor() as cur:
        cur.execute(source_digest_sql(table, schema=schema), {"buckets": buckets})
        return _digest(buckets, cur.fetchall(), schema.digest_signature())


@contextmanager
def column_salt(conn: Any, salt: str | None, schema: LakeSchema) -> Iterator[None]:
    """The salt of hashed columns as the session setting the digest's SQL reads, for the
    queries inside; cleared after. Nothing for a schema without hashed columns. The salt is in
    the text of that one ``set_config`` statement (psycopg2 binds values into the text): while
    it runs, ``pg_stat_activity`` shows it to the same role and to ``pg_read_all_stats``, and
    ``log_statement = 'all'`` or pgaudit would log it (docs/column-policies.md). It is never in
    the digest's own query, which may be logged as slow."""
    hashed = (*schema.hashed, *schema.hashed_fields)
    if not hashed:
        yield
        return
    if not salt:
        raise ValueError(
            f"{schema.table}: its columns {', '.join(hashed)} are hashed by the source "
            "connector, so the digest needs the salt: set CDC_LAKE_COLUMN_SALT (the "
            "PostgresResource's column_salt) to the connector's"
        )
    with conn.cursor() as cur:
        cur.execute("SELECT set_config(%s, %s, false)", (SALT_SETTING, salt))
    try:
        yield
    finally:
        if not conn.closed:
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT set_config(%s, '', false)", (SALT_SETTING,))
            except Exception:  # an aborted transaction: the setting ends with the session
                pass


# Comparison


@dataclass(frozen=True)
class DigestDiff:
    """Buckets whose digests differ. ``key_buckets``: count or key sums differ (keys missing or
    extra); ``content_buckets``: same key part, different content (stale rows)."""

    key_buckets: tuple[int, ...]
    content_buckets: tuple[int, ...]
    # Per differing bucket: {"kind": "keys" | "content", "source_rows", "lake_rows"}.
    details: dict[int, dict[str, Any]]

    @property
    def equal(self) -> bool:
        return not self.key_buckets and not self.content_buckets


def compare_digests(source: dict[str, Any], lake: dict[str, Any]) -> DigestDiff:
    """Which buckets differ between two digests, and how. Raises ValueError if the digests were
    computed differently (version or number of buckets) and cannot be compared."""
    for field in ("version", "buckets", "columns"):
        if source.get(field) != lake.get(field):
            raise ValueError(
                f"digests are not comparable: {field} {source.get(field)!r} (source) vs "
                f"{lake.get(field)!r} (lake)"
            )
    src, lk = source["digest"], lake["digest"]
    empty = [0, 0, 0, 0]
    keys: list[int] = []
    content: list[int] = []
    details: dict[int, dict[str, Any]] = {}
    for bucket in sorted(set(src) | set(lk), key=int):
        a = [int(v) for v in src.get(bucket, empty)]
        b = [int(v) for v in lk.get(bucket, empty)]
        if a == b:
            continue
        kind = "keys" if a[:3] != b[:3] else "content"
        (keys if kind == "keys" else content).append(int(bucket))
        details[int(bucket)] = {"kind": kind, "source_rows": a[0], "lake_rows": b[0]}
    return DigestDiff(tuple(keys), tuple(content), details)
