"""From raw Debezium lines to lake rows: parse, validate, order, deduplicate.

Pure functions of DataFrames: no I/O, no Hudi, no S3. The input is the S3 sink's JSON lines of
the ``datalake.cdc_events`` topic (ExtractNewRecordState, JSON without schemas), one change of
one order per line.

Bad input
    ``parse_raw_lines`` never drops or fails on a line. Blank lines are skipped; every other line
    comes out either as an event or with ``error`` set to a short reason, named by its S3 key and
    1-based line number. A line is bad when it is not exactly one JSON object (invalid or
    truncated JSON, two objects on one line), a number field has the wrong type, the key (on
    any change but a truncate's marker, ``t``, which names no row) / ``__op`` /
    ``__source_ts_ms`` is missing or null, ``__lsn`` is missing or null on a change that is not a
    snapshot read (``r``), ``__op`` is not one of r, c, u, d, t, ``__deleted`` is not
    "true"/"false", ``__lsn`` or ``__source_ts_ms`` is out of range, or
    ``updated_at`` is not a timestamp. The ingestion's reader also refuses, before parsing, a
    line that is not valid UTF-8 (Spark's text decoding would silently turn the bytes into
    U+FFFD) (``cdc_lake/lake/raw_lines.py``).

    How Spark 3.5's ``from_json`` in PERMISSIVE mode behaves (checked, and covered by tests): a
    wrong type in a number field (``"order_id": "abc"``, ``"__lsn": "x"``, ``1.5`` for a long, an
    int overflow) fills ``_corrupt_record`` and, with ``spark.sql.json.enablePartialResults``
    (default true), keeps the other fields. A number, object or array in a *string* field is
    not an error: Spark keeps its JSON text (``7`` -> ``"7"``), so a JSON column sent as a real
    object still arrives as the JSON text the lake stores. Content after the first JSON value is
    silently ignored (``{...}{...}`` parses as the first object), so lines are also checked with
    ``json_array_length('[' || line || ']')``, which rejects that. ``{}`` and explicit nulls
    are not corrupt; the required-field check catches them.

Ordering and deletes
    The merge rule, which change of an order wins and how deletes are written, lives in
    ``cdc_lake/lake/ordering.py``. Here a delete event (the whole old row with ``__deleted``
    "true") becomes a row with ``is_deleted`` true (also when ``__op`` is d), not a missing row,
    and every row gets its ``cdc_ordering``. Readers such as the order items
    (``cdc_lake/marts/order_items.py``) skip deleted rows. Orders that a completed snapshot no
    longer holds are deleted too, although no delete event names them
    (``cdc_lake/lake/snapshots.py``).

Idempotency
    Every function is deterministic: the same lines give the same rows and the same winner per
    order, so replaying a file, or a whole batch, leaves the table's content unchanged.

Time
    ``updated_at`` becomes a TimestampType instant. Debezium writes it with "Z"; a text without
    an offset would be read in the session time zone (UTC in this project's sessions).
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructType

from cdc_lake.lake import ordering as O
from cdc_lake.lake.schema import LakeSchema
from cdc_lake.source.captured import CapturedTable

CORRUPT_COLUMN = "_corrupt_record"
# Optional input column: a reason found before parsing (invalid UTF-8, too long), or null.
INPUT_ERROR = "input_error"
# Every change's operation, and a truncate's marker (``ordering.TRUNCATE_OP``).
OPS = (*O.OP_RANK, O.TRUNCATE_OP)
MAX_SOURCE_TS_MS = O.MAX_SOURCE_TS_MS
NULL_PARTITION = "__null__"
# The sink's key ends with +<partition>+<start offset, 20 digits>.jsonl.
KEY_POSITION = r"\+(\d+)\+(\d{20})\.jsonl$"

# Debezium's own fields (ExtractNewRecordState's add.fields, the delete rewrite) and the sink's,
# after the table's columns in every raw line: (name, Spark type).
META_FIELDS: tuple[tuple[str, str], ...] = (
    ("__deleted", "string"),
    ("__op", "string"),
    ("__db", "string"),
    ("__table", "string"),
    ("__schema", "string"),
    ("__lsn", "bigint"),
    ("__source_ts_ms", "bigint"),
    # Debezium's source.snapshot: first, true, last, ..., false or incremental.
    ("__source_snapshot", "string"),
    # Added by Connect's InsertField transform on the sink; absent in lines written before.
    ("__kafka_topic", "string"),
    ("__kafka_partition", "int"),
    ("__kafka_offset", "bigint"),
)
# The lake's own columns after the table's: the change's metadata and the merge rule's.
CDC_COLUMNS = ("cdc_op", "cdc_lsn", "cdc_source_ts_ms", "is_deleted", O.ORDERING_FIELD)
# Fields of a line that are neither the table's columns nor META_FIELDS (a schema change).
UNKNOWN_FIELDS = "unknown_fields"


def raw_event_schema(schema: LakeSchema) -> StructType:
    """A raw line's schema: the table's columns (``schema``), Debezium's and the sink's fields,
    and the corrupt-record column of PERMISSIVE parsing."""
    return schema.raw_struct((*META_FIELDS, (CORRUPT_COLUMN, "string")))


def required_fields(schema: LakeSchema) -> tuple[str, ...]:
    return (*schema.keys, "__op", "__lsn", "__source_ts_ms")


def lake_columns(schema: LakeSchema, table: CapturedTable) -> tuple[str, ...]:
    """The lake row's columns, in ``to_lake_rows``' order: those of ``schema``, the lake's
    own, and the partition column of ``table`` (the declaration of ``schema``'s table, as the
    caller has it: the Spark apps get it in their parameters and never look a table up)."""
    return (*schema.names, *CDC_COLUMNS, *table.lake_partition)


def lines_from_text(spark: SparkSession, key_and_text: list[tuple[str, str]]) -> DataFrame:
    """``(source_key, line_no, value)`` rows from whole-file texts, for tests and small runs.

    Lines are split at \\n only, like the ingestion's reader of whole files, so both number
    lines alike; a \\r before it stays in the line and JSON parsing treats it as whitespace.
    A final \\n does not start another line.
    """
    files = [(key, text.removesuffix("\n")) for key, text in key_and_text]
    files = [(key, text) for key, text in files if text != ""]
    # Texts go in as literals and are split in the JVM: a DataFrame made from Python rows
    # starts Python workers for every action on it.
    texts = F.array(
        *[
            F.struct(F.lit(key).alias("source_key"), F.lit(text).alias("text"))
            for key, text in files or [("", "")]
        ]
    )
    return (
        spark.range(1 if files else 0)
        .select(F.inline(texts))
        .select("source_key", F.posexplode(F.split("text", "\n")).alias("pos", "value"))
        .select(
            F.col("source_key"),
            (F.col("pos") + 1).cast(IntegerType()).alias("line_no"),
            F.col("value"),
        )
    )


def parse_raw_lines(lines: DataFrame, schema: LakeSchema) -> DataFrame:
    """Parse ``(source_key, line_no, value)`` lines into events of the table ``schema``
    describes.

    Output: the ``raw_event_schema`` columns (``_corrupt_record`` included), ``source_key``,
    ``line_no``, ``value``, ``error`` (null for a good line) and ``unknown_fields``: the line's
    top-level fields that are neither the table's columns nor Debezium's or the sink's (a
    column the lake does not know: the ingestion stops on it, see ``cdc_lake/lake/ingest.py``).
    A column with a missing value (added at the source with a default) that the line lacks
    gets that value (``LakeSchema.with_missing_values``): the line was written before the
    column existed. Blank lines are dropped. When ``lines`` has an ``input_error`` column
    (``raw_lines.read_lines``), a line with one is not parsed and that is its error.
    """
    struct = raw_event_schema(schema)
    value = F.col("value")
    if INPUT_ERROR not in lines.columns:
        lines = lines.withColumn(INPUT_ERROR, F.lit(None).cast(StringType()))
    # A line refused before parsing is not parsed: its bytes are not what the text says.
    to_parse = F.when(F.col(INPUT_ERROR).isNull(), value)
    # Explicit options also stop the optimizer from pruning the parse schema, which would
    # hide type errors in fields nobody selects.
    event = F.from_json(
        to_parse,
        struct,
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN},
    )
    # from_json stops after the first value; as an array element, trailing content is an error.
    n_values = F.json_array_length(F.concat(F.lit("["), to_parse, F.lit("]")))
    known = F.array(*[F.lit(f.name) for f in struct.fields if f.name != CORRUPT_COLUMN])
    keys = F.json_object_keys(to_parse)
    unknown = F.array_except(keys, known)
    parsed = (
        lines.where(value.isNotNull() & ~value.rlike(r"^\s*$"))
        # Parsing inside a generator: the optimizer would otherwise push a later filter on
        # `error` below the parse and inline from_json into it once per field it reads.
        .select(
            "source_key",
            "line_no",
            "value",
            INPUT_ERROR,
            F.inline(
                F.array(
                    F.struct(
                        event.alias("_event"),
                        n_values.alias("_n_values"),
                        unknown.alias(UNKNOWN_FIELDS),
                        keys.alias("_keys"),
                    )
                )
            ),
        )
        .select(
            "_event.*",
            "source_key",
            "line_no",
            "value",
            INPUT_ERROR,
            "_n_values",
            UNKNOWN_FIELDS,
            "_keys",
        )
    )
    parsed = schema.with_missing_values(parsed, F.col("_keys"))
    partial = lines.sparkSession.conf.get("spark.sql.json.enablePartialResults", "true")
    error = _error_reason(schema, F.col("_n_values"), precise_types=partial == "true")
    return parsed.withColumn("error", error).drop("_n_values", INPUT_ERROR, "_keys")


def _error_reason(schema: LakeSchema, n_values: Column, precise_types: bool) -> Column:
    """The first problem of a line, or null. A CASE, so a good line costs one pass of checks."""
    value = F.col("value")
    if precise_types:
        # Null after parsing although the line has a non-null value there: that field's type.
        typed = [
            f for f in raw_event_schema(schema).fields if not isinstance(f.dataType, StringType)
        ]
        culprits = F.concat_ws(
            ", ",
            *[
                F.when(
                    F.col(f.name).isNull() & F.get_json_object(value, f"$.{f.name}").isNotNull(),
                    F.lit(f"{f.name} is not {f.dataType.simpleString()}"),
                )
                for f in typed
            ],
        )
        wrong_type = F.concat_ws(": ", F.lit("wrong type"), F.nullif(culprits, F.lit("")))
    else:
        # Without partial results every field is null, so the culprit cannot be named.
        wrong_type = F.lit("wrong type")

    # Incremental-snapshot reads (r) carry no LSN; every other change must.
    required = required_fields(schema)
    absent = {name: F.col(name).isNull() for name in required}
    absent["__lsn"] = absent["__lsn"] & (F.col("__op") != "r")
    # A truncate's marker names no row: it has no key.
    for key in schema.keys:
        absent[key] = absent[key] & (F.coalesce(F.col("__op"), F.lit("")) != O.TRUNCATE_OP)
    missing = F.concat_ws(", ", *[F.when(absent[name], F.lit(name)) for name in required])
    op, deleted = F.col("__op"), F.col("__deleted")
    ts = F.col("__source_ts_ms")
    reason = (
        F.when(F.col(INPUT_ERROR).isNotNull(), F.col(INPUT_ERROR))
        .when(n_values.isNull(), F.lit("not valid JSON"))
        .when(n_values != 1, F.lit("more than one JSON value on the line"))
        .when(~value.rlike(r"^\s*\{"), F.lit("not a JSON object"))
        .when(F.col(CORRUPT_COLUMN).isNotNull(), wrong_type)
        .when(
            reduce(lambda a, b: a | b, absent.values()),
            F.concat(F.lit("missing or null: "), missing),
        )
        .when(~op.isin(*OPS), F.concat(F.lit("unknown __op '"), F.substring(op, 1, 20), F.lit("'")))
        .when(
            deleted.isNotNull() & ~deleted.isin("true", "false"),
            F.concat(F.lit("unknown __deleted '"), F.substring(deleted, 1, 20), F.lit("'")),
        )
        .when(F.col("__lsn") < 0, F.lit("__lsn is negative"))
        .when(F.col("__kafka_offset") < 0, F.lit("__kafka_offset is negative"))
        .when((ts < 0) | (ts > MAX_SOURCE_TS_MS), F.lit("__source_ts_ms out of range"))
    )
    for name in schema.timestamp_columns():
        text = F.col(name)
        reason = reason.when(
            text.isNotNull() & F.try_to_timestamp(text).isNull(),
            F.lit(f"{name} is not a timestamp"),
        )
    return reason


def with_kafka_position(parsed: DataFrame, topic: str) -> DataFrame:
    """Adds each line's ``kafka_partition`` and ``kafka_offset``.

    The partition comes from the object's key, which the lister has already matched to the
    topic. The offset is the line's own ``__kafka_offset``; a line written before the sink added
    it gets its object's start offset plus its line number minus one (the sink writes
    consecutive offsets, one line each). A line whose ``__kafka_topic`` or ``__kafka_partition``
    disagrees with its object is bad input, named like any other.
    """
    key = F.col("source_key")
    partition = F.regexp_extract(key, KEY_POSITION, 1).cast(IntegerType())
    start = F.regexp_extract(key, KEY_POSITION, 2).cast(LongType())
    line_topic, line_partition = F.col("__kafka_topic"), F.col("__kafka_partition")
    mismatch = F.when(
        line_topic.isNotNull() & (line_topic != F.lit(topic)),
        F.concat(
            F.lit("__kafka_topic '"),
            F.substring(line_topic, 1, 100),
            F.lit(f"' is not the configured topic '{topic}'"),
        ),
    ).when(
        line_partition.isNotNull() & (line_partition != partition),
        F.concat(
            F.lit("__kafka_partition "),
            line_partition.cast(StringType()),
            F.lit(" is not its object's partition "),
            partition.cast(StringType()),
        ),
    )
    return (
        parsed.withColumn("kafka_partition", partition)
        .withColumn(
            "kafka_offset", F.coalesce(F.col("__kafka_offset"), start + F.col("line_no") - 1)
        )
        .withColumn("error", F.coalesce(F.col("error"), mismatch))
    )


def split_valid(parsed: DataFrame) -> tuple[DataFrame, DataFrame]:
    """``(good, bad)`` from ``parse_raw_lines``' output.

    good: the event columns plus ``source_key`` and ``line_no``. bad: ``source_key``,
    ``line_no``, ``error``, ``value``. Both re-read ``parsed``: persist it if using both.
    """
    good = parsed.where(F.col("error").isNull()).drop(
        "error", CORRUPT_COLUMN, "value", UNKNOWN_FIELDS
    )
    bad = parsed.where(F.col("error").isNotNull()).select("source_key", "line_no", "error", "value")
    return good, bad


def to_lake_rows(good: DataFrame, schema: LakeSchema, table: CapturedTable) -> DataFrame:
    """Good events as rows of the lake table (``schema``'s, which ``table`` declares), columns
    as ``lake_columns`` says."""
    partition = []
    if table.partition_field:
        # The year of a date column; rows without one share the NULL_PARTITION.
        year = F.date_format(F.date_from_unix_date(F.col(table.partition_from)), "yyyy")
        partition = [F.coalesce(year, F.lit(NULL_PARTITION)).alias(table.partition_field)]
    return good.select(
        *schema.to_lake(),
        F.col("__op").alias("cdc_op"),
        F.col("__lsn").alias("cdc_lsn"),
        F.col("__source_ts_ms").alias("cdc_source_ts_ms"),
        (F.coalesce(F.col("__deleted") == "true", F.lit(False)) | (F.col("__op") == "d")).alias(
            "is_deleted"
        ),
        O.ordering(F.col("__source_ts_ms"), F.col("__lsn")).alias(O.ORDERING_FIELD),
        *partition,
    )
