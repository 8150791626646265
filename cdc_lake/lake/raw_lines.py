"""The raw lines of a refresh: where they are read from (``RawSource``), reading them as bytes
(``read_lines``), what one pass over a batch of them tells (``summarize``), and the messages
naming the lines a refresh stops on (``malformed_message``, ``unknown_fields_message``). What
the refresh does with them: ``cdc_lake/lake/ingest.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake import checkpoint as C
from cdc_lake.lake import ordering as O
from cdc_lake.lake import snapshots as S
from cdc_lake.lake import transforms as T
from cdc_lake.lake import unavailable as U
from cdc_lake.raw.objects import RawLayout, RawObject
from cdc_lake.source.captured import UNAVAILABLE_VALUE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from cdc_lake.lake.schema import LakeSchema

# What the source connector writes for a hashed column: a SHA-256 in lowercase hex.
HASH_PATTERN = "^[0-9a-f]{64}$"
# A raw line written before a column policy reached the source connector (docs/column-policies.md).
POLICY_WAY_FORWARD = (
    "Nothing was committed. Way forward: update the connector (materialize the connector "
    "assets), then write a new lake table from a snapshot taken after it "
    "(docs/column-policies.md)."
)


# A longer raw line is a bad line, not parsed (``LakeResource.max_line_mb``). Past about 19 MB
# one JSON string exceeds the parser's own limit (Jackson's 20M characters) anyway.
DEFAULT_MAX_LINE_MB = 8.0
MB = 1024 * 1024


@dataclass(frozen=True)
class RawSource:
    bucket: str
    prefix: str
    topic: str
    scheme: str = "s3a"  # Hadoop's filesystem scheme for the same bucket

    @property
    def layout(self) -> RawLayout:
        return RawLayout(self.prefix, self.topic)

    def uri(self, key: str) -> str:
        return f"{self.scheme}://{self.bucket}/{key}"

    def s3_uri(self, key: str) -> str:
        """The object as the user knows it, for messages (``uri`` is Hadoop's)."""
        return f"s3://{self.bucket}/{key}"


def read_lines(
    spark: SparkSession,
    source: RawSource,
    objects: list[RawObject],
    max_line_mb: float = DEFAULT_MAX_LINE_MB,
) -> DataFrame:
    """(source_key, line_no, value, input_error) for every line of the objects; line_no is
    1-based. ``input_error`` names a line over ``max_line_mb`` (MB of 2^20 bytes, the \\n not
    counted) or not valid UTF-8, and is null otherwise; ``parse_raw_lines`` reports it.

    Objects are read as bytes, not as text: Spark's text reader would turn invalid UTF-8 into
    U+FFFD and the line would pass. Bytes map 1:1 onto ISO-8859-1 characters, so the split at
    \\n and each line's bytes are exact; each line is then decoded as UTF-8.
    """
    paths = [source.uri(o.key) for o in objects]
    files = spark.read.format("binaryFile").load(paths)
    prefix_len = len(f"{source.scheme}://{source.bucket}/")
    lines = files.select(
        F.expr(f"substring(path, {prefix_len + 1})").alias("source_key"),
        F.posexplode(F.split(F.decode("content", "ISO-8859-1"), "\n")).alias("pos", "raw"),
    )
    raw = F.encode(F.col("raw"), "ISO-8859-1")
    text = F.decode(raw, "UTF-8")
    # Decoding replaces invalid bytes with U+FFFD; only then can the round trip differ, so
    # lines without one skip the re-encoding.
    invalid = F.instr(F.col("value"), "\ufffd") > 0
    invalid = invalid & (F.encode(F.col("value"), "UTF-8") != F.encode(F.col("raw"), "ISO-8859-1"))
    n_bytes = F.length("raw")  # one ISO-8859-1 character per byte
    return lines.select(
        "source_key", (F.col("pos") + 1).cast("int").alias("line_no"), "raw", text.alias("value")
    ).select(
        "source_key",
        "line_no",
        "value",
        F.when(
            n_bytes > F.lit(int(max_line_mb * MB)),
            F.format_string(
                f"line %d is %.1f MB, over the limit of {max_line_mb:g} MB",
                F.col("line_no"),
                n_bytes / F.lit(MB),
            ),
        )
        .when(invalid, F.lit("not valid UTF-8"))
        .alias(T.INPUT_ERROR),
    )


def describe_bad(bad: DataFrame, limit: int = 5) -> list[str]:
    rows = bad.orderBy("source_key", "line_no").limit(limit).collect()
    return [f"{r['source_key']} line {r['line_no']}: {r['error']}" for r in rows]


def malformed_message(n_bad: int, bad: DataFrame, source: RawSource) -> str:
    """What is wrong, and how to get past it: the same lines block every later refresh."""
    keys = [r["source_key"] for r in bad.select("source_key").distinct().orderBy("source_key")
            .limit(5).collect()]  # fmt: skip
    return (
        f"{n_bad} malformed line(s) in the raw files; nothing was committed. "
        + "; ".join(describe_bad(bad))
        + ". Every refresh stops here until these lines are dealt with. To get past them, "
        "either enable quarantine: LakeResource(quarantine=True) (locally "
        "local_resources(lake={'quarantine': True})) writes bad lines to the quarantine prefix "
        "and commits the rest; or fix or remove the object(s) "
        + ", ".join(source.s3_uri(k) for k in keys)
        + " (removing one also drops its good lines)."
    )


@dataclass(frozen=True)
class Batch:
    """What one pass over the batch's lines tells (``summarize``)."""

    lines: int  # every line read, fresh or not
    fresh: int  # past the checkpoint
    bad: int  # fresh and bad
    good: int  # fresh and good: the events read
    snapshot_ts_ms: int | None  # a completed snapshot's time (``S.completed_snapshot_ts``)
    truncate: tuple[int, int] | None  # the newest truncate's (ts, lsn) among the good lines
    newest_ts_ms: int | None  # the greatest source time among the good lines (None: none)
    unavailable: int  # good lines holding Debezium's placeholder (``U.line_has_placeholder``)
    progress: dict[int, C.PartitionProgress]
    gaps: int
    unknown_fields: list[str]  # fields of fresh good lines that the schema does not know
    unknown_at: str | None  # the first line holding one: "<key> line <n>"
    # The first fresh good line that breaks a column policy (written before the policy reached
    # the source connector): "<key> line <n>", and what it holds (``policy_breaches``).
    unhashed_at: tuple[str, str] | None = None


def summarize(
    parsed: DataFrame,
    is_fresh: Column,
    objects: list[RawObject],
    checkpoint: C.Checkpoint,
    schema: LakeSchema | None = None,
) -> Batch:
    """The batch's counts, snapshot end, and per partition the greatest offset read and the
    object holding it, plus the offsets missing between the checkpoint and that offset: one
    Spark job over the (cached) lines instead of one per figure.

    A partition's distinct offsets are counted exactly (an offset the sink delivered twice
    counts once) with Spark's offset bitmaps: the lines are grouped by partition and bitmap
    bucket (32,768 offsets each), and the buckets' counts are added here. A ``count_distinct``
    beside the other figures made Spark expand every line and shuffle it twice more."""
    fresh = F.coalesce(is_fresh, F.lit(False))
    good = fresh & F.col("error").isNull()
    has_unknown = good & (F.size(T.UNKNOWN_FIELDS) > 0)
    unhashed = F.lit(None).cast("string")
    for what, breaks in reversed(policy_breaches(schema) if schema is not None else []):
        unhashed = F.when(breaks, F.lit(what)).otherwise(unhashed)
    has_unhashed = good & unhashed.isNotNull()
    offset = F.col("kafka_offset")
    # Among objects holding the same greatest offset, the earliest: listing resumes there.
    newest = F.struct(offset, (-F.col("start")).alias("minus_start"), F.col("source_key"))
    truncate_at = F.struct(
        F.col("__source_ts_ms").alias("ts"), F.coalesce(F.col("__lsn"), F.lit(0)).alias("lsn")
    )
    rows = (
        parsed.withColumn("start", F.regexp_extract("source_key", T.KEY_POSITION, 2).cast("long"))
        # Fresh offsets are >= 0 (past a checkpoint of at least -1); other lines: no bucket.
        .withColumn("bucket", F.when(fresh, F.bitmap_bucket_number(offset)))
        .groupBy("kafka_partition", "bucket")
        .agg(
            F.count(F.lit(1)).alias("lines"),
            F.count_if(fresh).alias("fresh"),
            F.count_if(fresh & F.col("error").isNotNull()).alias("bad"),
            F.count_if(good).alias("good"),
            F.max(F.when(good, S.snapshot_end_ts())).alias("snapshot_ts"),
            F.max(F.when(good & (F.col("__op") == O.TRUNCATE_OP), truncate_at)).alias("truncate"),
            F.max(F.when(good, F.col("__source_ts_ms"))).alias("newest_ts"),
            F.count_if(good & U.line_has_placeholder()).alias("unavailable"),
            F.max(F.when(fresh, newest)).alias("newest"),
            F.min(F.when(fresh, offset)).alias("low"),
            F.bitmap_construct_agg(F.when(fresh, F.bitmap_bit_position(offset))).alias("bits"),
            F.array_distinct(
                F.flatten(F.collect_list(F.when(has_unknown, F.col(T.UNKNOWN_FIELDS))))
            ).alias("unknown"),
            F.min(F.when(has_unknown, F.struct("source_key", "line_no"))).alias("unknown_at"),
            F.min(
                F.when(has_unhashed, F.struct("source_key", "line_no", unhashed.alias("column")))
            ).alias("unhashed_at"),
        )
        .withColumn("n", F.when(F.col("bucket").isNotNull(), F.bitmap_count("bits")))
        .drop("bits")
        .collect()
    )
    etags = {o.key: o.etag for o in objects}
    fresh_by_partition: dict[int, list[Any]] = {}  # a partition's buckets with fresh lines
    for r in rows:
        if r["fresh"]:
            fresh_by_partition.setdefault(int(r["kafka_partition"]), []).append(r)
    progress, gaps = {}, 0
    for p, buckets in fresh_by_partition.items():
        top = max(r["newest"] for r in buckets)
        low = min(int(r["low"]) for r in buckets)
        n = sum(int(r["n"]) for r in buckets)
        progress[p] = C.PartitionProgress(
            int(top["kafka_offset"]), -int(top["minus_start"]), etags.get(top["source_key"], "")
        )
        gaps += int(top["kafka_offset"]) - low + 1 - n
        gaps += low - checkpoint.offset(p) - 1
    snapshots = [int(r["snapshot_ts"]) for r in rows if r["snapshot_ts"] is not None]
    unknown_at = [tuple(r["unknown_at"]) for r in rows if r["unknown_at"] is not None]
    first = min(unknown_at, default=None)
    plain = min((tuple(r["unhashed_at"]) for r in rows if r["unhashed_at"] is not None),
                default=None)  # fmt: skip
    truncates = [(int(r["truncate"]["ts"]), int(r["truncate"]["lsn"])) for r in rows
                 if r["truncate"] is not None]  # fmt: skip
    return Batch(
        lines=sum(int(r["lines"]) for r in rows),
        fresh=sum(int(r["fresh"]) for r in rows),
        bad=sum(int(r["bad"]) for r in rows),
        good=sum(int(r["good"]) for r in rows),
        snapshot_ts_ms=max(snapshots) if snapshots else None,
        truncate=max(truncates, default=None),
        newest_ts_ms=max(
            (int(r["newest_ts"]) for r in rows if r["newest_ts"] is not None), default=None
        ),
        unavailable=sum(int(r["unavailable"]) for r in rows),
        progress=progress,
        gaps=gaps,
        unknown_fields=sorted({f for r in rows for f in (r["unknown"] or [])}),
        unknown_at=f"{first[0]} line {first[1]}" if first else None,
        unhashed_at=(f"{plain[0]} line {plain[1]}", str(plain[2])) if plain else None,
    )


def policy_breaches(schema: LakeSchema) -> list[tuple[str, Column]]:
    """Per column policy, what a raw line breaking it holds, and the test of a line for it.

    A hashed column's or field's value is the connector's hash (64 hex digits), null, or (a
    column's) Debezium's placeholder; anything else is a plain value. An excluded field of a
    jsonb column is absent from its object. (An excluded column is a field of the line that the
    schema does not know: ``unknown_fields_message``.)"""
    out: list[tuple[str, Column]] = []
    for name in schema.hashed:
        plain = F.col(name).isNotNull() & ~F.col(name).rlike(HASH_PATTERN)
        plain = plain & (F.col(name) != F.lit(UNAVAILABLE_VALUE))
        out.append((f"a plain value of {name}, which the declaration hashes", plain))
    for c in schema.live:
        excluded, hashed = schema.field_policies(c.name)
        for field in hashed:
            value = F.get_json_object(F.col(c.name), f"$.{field}")
            plain = value.isNotNull() & ~value.rlike(HASH_PATTERN)
            what = f"a plain value of {c.name}.{field}, which the declaration hashes"
            out.append((what, plain))
        for field in excluded:
            held = F.array_contains(F.json_object_keys(F.col(c.name)), field)
            what = f"the field {c.name}.{field}, which the declaration excludes"
            out.append((what, F.coalesce(held, F.lit(False))))
    return out


def unhashed_message(batch: Batch, schema: LakeSchema, source: RawSource) -> str:
    """A raw line breaks a column policy: where, what it holds, and the way forward."""
    assert batch.unhashed_at is not None
    where, what = batch.unhashed_at
    key, _, line = where.partition(" line ")
    return (
        f"{schema.table}: the raw line at {source.s3_uri(key)} line {line} holds {what}: it "
        f"was written before the policy reached the source connector. {POLICY_WAY_FORWARD}"
    )


def unknown_fields_message(batch: Batch, schema: LakeSchema, source: RawSource) -> str:
    where = batch.unknown_at or ""
    key, _, line = where.partition(" line ")
    excluded = sorted(set(batch.unknown_fields) & set(schema.excluded))
    if excluded:
        # Written before the column's exclusion reached the source connector: its values must
        # not reach the lake (cdc_lake/lake/schema/policy.py).
        return (
            f"{schema.table}: raw lines hold the excluded column(s) {', '.join(excluded)}, "
            f"first at {source.s3_uri(key)} line {line}: they were written before the exclusion "
            f"reached the source connector. {POLICY_WAY_FORWARD}"
        )
    return (
        f"{schema.table}: raw lines hold field(s) {', '.join(batch.unknown_fields)} that neither "
        f"the source table's columns (as its catalog stood when this refresh began) nor the lake "
        f"table has; first at {source.s3_uri(key)} line "
        f"{line}. Nothing was committed. If the column was added at the source just now, "
        "refresh again: the next refresh reads the catalog anew and adds it. If it was added "
        "and dropped again before the lake saw it, add it back (ALTER TABLE ... ADD COLUMN) so "
        "its type is known, refresh, then drop it."
    )
