"""Hudi's change feed: what each commit did to each order, before and after.

A table created with Hudi's change data capture on (``HudiTableConfig.change_feed``:
``hoodie.table.cdc.enabled``, supplemental logging ``DATA_BEFORE_AFTER``; off by default, and
on in tables an earlier release created) logs, with every commit, for each record it changed,
the row before and the row after. A CDC query over a range of completion times
(``read_changes``) then reads those logs, not the table: its cost follows the records the
commits changed, not the table's size. By default the upsert writes each commit's own change
set instead (``cdc_lake/lake/change_sets.py``), which readers prefer where every commit has one;
the feed is followed where a commit has none.

What a commit logs, per record it wrote (one row each):

- ``i``: a new key (``before`` null);
- ``u``: a key updated (both images). A change that lost to a newer stored one (the merge rule
  of ``cdc_lake/lake/ordering.py``) is logged as a ``u`` whose two images are equal, or not at
  all: either way it adds nothing;
- ``d``: a key deleted (``after`` null); a hard delete, and also the old row of an order whose
  partition changed, whose new row comes as an ``i`` in the same commit.

So, per order, the state before the range is the ``before`` image in its first commit in the
range (none if that commit only inserted it), and the state after the range is the ``after``
image in its last commit (none if that commit deleted it): ``first_and_last``. Images carry the
lake's columns with dates as days since 1970-01-01 and timestamps as microseconds; ``image_rows``
gives them back as lake rows, typed as the table's.

Table types (Hudi 1.1, verified by ``cdc_lake_tests/lake/test_changes.py`` and
``test_table_state.py`` on both)
    COPY_ON_WRITE: each commit writes its CDC log beside the file versions it rewrites, and
    the query reads those logs only. MERGE_ON_READ: a delta commit appends to log files and
    writes no CDC log; the query infers its changes, for each file group the commit appended
    to, by loading that group's whole previous file slice (base file and earlier log files)
    and merging the commit's log records into it (Hudi's ``LOG_FILE`` inference case), once
    per delta commit in the range. Compactions change no data and are not in the feed. The
    result is as exact as on COPY_ON_WRITE (the same ``i``/``u``/``d`` rows, changes that lost
    logged as equal images), but its cost follows the size of the file groups touched, not
    the records changed: changes spread over a table read all of it, as a rescan would. So
    the checks and the order items follow the feed on COPY_ON_WRITE only.

A table written without the change feed has no CDC logs
(``cdc_lake.lake.hudi_timeline.has_change_feed`` tells): where a commit has no change set either,
callers read the whole snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from cdc_lake.lake.schema import spark_type
from cdc_lake.source.captured import key_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from cdc_lake.lake.schema import LakeSchema

# The write options that turn the change feed on (part of HudiTableConfig.write_options).
CHANGE_FEED_OPTIONS = {
    "hoodie.table.cdc.enabled": "true",
    "hoodie.table.cdc.supplemental.logging.mode": "DATA_BEFORE_AFTER",
}

# The lake's own columns in an image, after the table's (``cdc_lake/lake/transforms.py``).
_CDC_IMAGE_FIELDS = (
    ("cdc_op", "string"),
    ("cdc_lsn", "bigint"),
    ("cdc_source_ts_ms", "bigint"),
    ("is_deleted", "boolean"),
    ("cdc_ordering", "string"),
)


def image_schema(schema: LakeSchema) -> StructType:
    """An image's fields as the CDC log writes them (the table's columns as ``schema`` says);
    other keys (Hudi's meta columns) are ignored."""
    struct = schema.image_struct()
    for name, ddl in _CDC_IMAGE_FIELDS:
        struct.add(name, spark_type(ddl))
    return struct


def read_changes(
    spark: SparkSession,
    base_path: str,
    after_completed: str,
    upto_completed: str,
    schema: LakeSchema,
) -> DataFrame:
    """The change feed of the commits that completed after ``after_completed`` and up to
    ``upto_completed`` (completion times; ``"0"`` for "from the first commit"): columns
    the table's key, ``op``, ``commit`` (the commit's instant) and ``before``/``after`` as structs
    of ``image_schema(schema)`` (null where the image is). A column added after a commit is
    null in that commit's images."""
    struct = image_schema(schema)
    raw = (
        spark.read.format("hudi")
        .options(
            **{
                "hoodie.datasource.query.type": "incremental",
                "hoodie.datasource.query.incremental.format": "cdc",
                "hoodie.datasource.read.begin.instanttime": after_completed,
                "hoodie.datasource.read.end.instanttime": upto_completed,
            }
        )
        .load(base_path)
    )

    def image(name: str):
        # A missing image is written as null or as the JSON text "null".
        text = F.when(F.col(name) != F.lit("null"), F.col(name))
        return F.from_json(text, struct).alias(name)

    images = raw.select("op", F.col("ts_ms").alias("commit"), image("before"), image("after"))
    keys = schema.keys
    return images.select(
        *[F.coalesce(F.col("after")[k], F.col("before")[k]).alias(k) for k in keys],
        "op",
        "commit",
        "before",
        "after",
    )


def first_and_last(changes: DataFrame, key: str | Sequence[str]) -> DataFrame:
    """Per key (a column, or a composite key's columns), its state before the range
    (``before``: null if it did not exist) and after it (``after``: null if it no longer
    exists), from ``read_changes``' rows."""
    keys = key_columns(key)
    by_key = Window.partitionBy(*keys)
    per_commit = changes.groupBy(*keys, "commit").agg(
        # Within a commit an order has at most one before and one after (a partition move
        # logs its old row as a d and its new row as an i).
        F.first("before", ignorenulls=True).alias("before"),
        F.first("after", ignorenulls=True).alias("after"),
    )
    ranked = per_commit.select(
        *keys,
        "before",
        "after",
        (F.col("commit") == F.min("commit").over(by_key)).alias("_first"),
        (F.col("commit") == F.max("commit").over(by_key)).alias("_last"),
    )
    return ranked.groupBy(*keys).agg(
        F.first(F.when(F.col("_first"), F.col("before")), ignorenulls=True).alias("before"),
        F.first(F.when(F.col("_last"), F.col("after")), ignorenulls=True).alias("after"),
    )


def image_rows(images: DataFrame, side: str, schema: LakeSchema, typed: bool = False) -> DataFrame:
    """The non-null ``side`` images (``before`` or ``after``) as lake rows: the table's column
    names and types (dates as DATE, timestamps as TIMESTAMP). ``typed``: the images already are
    (change sets, ``cdc_lake/lake/change_sets.py``). ``schema``: the table's."""
    img = images.where(F.col(side).isNotNull()).select(F.col(f"{side}.*"))
    return img if typed else img.select(*schema.from_image(img.columns))
