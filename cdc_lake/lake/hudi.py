"""Hudi write options, commit metadata and the ingestion checkpoint. Reading a table's timeline,
commits and config back is ``cdc_lake/lake/hudi_timeline.py``.

Semantics the options guarantee:
- **Key, ordering and deletes** follow the merge rule of ``cdc_lake/lake/ordering.py``, whose
  ``merge_options`` these options include. ``delete_mode`` is ``hard`` (the default) or
  ``soft``.
- **Partitioning.** None by default: no key can change partition, so an upsert never reads the
  records of the file groups it touches to reconcile a move (a batch of 10,000 changes into 1M
  orders: 0.55-0.70x of the time of the ``order_year`` layout, docs/benchmarks-log.md).
  ``partition_field="order_year"`` partitions by year; the index is global, and a record whose
  partition value changes is deleted from its old partition, so no duplicate is left. The layout
  is fixed when the table is created: writes to an existing table follow the layout it records
  (``laid_out_as``), whatever the setting says.
- **Index.** The record-level index (``RECORD_INDEX``, kept in Hudi's metadata table) by default:
  an upsert looks its keys up instead of reading the keys of every base file, so its cost grows
  with the new work, not with the table (``python -m bench --only index``: 1.09x from 2,000 to
  200,000 orders, against 1.46x for ``GLOBAL_SIMPLE``). ``index_type="GLOBAL_SIMPLE"`` keeps the
  older behaviour.
- **No listening socket on other interfaces.** Hudi's embedded timeline server (a Javalin
  server in the driver that serves file system views and markers to the tasks) binds every
  interface, and Hudi 1.1 has no option for its address. It is off unless
  ``embedded_timeline_server`` is set (production, where executors on other nodes of the EMR
  cluster use it): tasks build their file system views from the metadata table, and markers are
  written directly to storage (``DIRECT``), so a failed write is rolled back as before.
- **Changes.** By default the upsert writes each COPY_ON_WRITE commit's change set
  (``change_sets``, ``cdc_lake/lake/change_sets.py``), which the checks and the order items
  follow. Hudi's change feed (``change_feed``, Hudi CDC, ``cdc_lake/lake/changes.py``) is off:
  its images are uncompressed Avro, most of a table's bytes. A table created with the feed
  keeps it (a table property), and readers follow it where a commit has no change set.
  ``change_feed_gap`` (``cdc_lake/lake/hudi_timeline.py``) tells whether the feed still covers
  every commit after a given one (archival and the cleaner remove old commits and their logs).
- **Cost of a commit.** Base files in snappy, no column statistics in the metadata table (no
  reader uses data skipping), no bloom filter in base files with the record index (which never
  reads one), the cleaner planned every ``clean_every_commits`` commits: none changes what a
  reader sees (``python -m bench.commit_cost`` compares the tables' digests).
- **Checkpoint.** The ingestion's progress (the last Kafka offset per topic partition, see
  ``cdc_lake/lake/checkpoint.py``) goes into the commit's extra metadata, so it is committed
  atomically with the data: a commit that fails leaves neither.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from cdc_lake.aws.glue import glue_sync_options
from cdc_lake.lake import ordering as O
from cdc_lake.lake.changes import CHANGE_FEED_OPTIONS
from cdc_lake.lake.checkpoint import CHECKPOINT_KEY
from cdc_lake.lake.schema import SCHEMA_KEY, LakeSchema, schema_json

# The lake apps' Spark session settings: the local session and the EMR launchers' spark-submit
# both start from these. Hudi needs Kryo with its registrar, its SQL extension and catalog.
SESSION_CONF = {
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    "spark.kryo.registrator": "org.apache.spark.HoodieSparkKryoRegistrar",
    "spark.sql.extensions": "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.hudi.catalog.HoodieCatalog",
    # A cached DataFrame (the batch's parsed lines, its latest rows) is kept uncompressed:
    # encoding the lines' long JSON strings cost more than the upsert saved by it (a batch of
    # 100,000 events: 0.87x the ingest, docs/benchmarks-log.md). Caches spill to disk when full.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}


# Hudi's meta columns (_hoodie_record_key and the others): always stored, see __post_init__.
META_FIELDS = "hoodie.populate.meta.fields"


def timeline_server_options(embedded: bool) -> dict[str, str]:
    """The embedded timeline server on or off (see the module docstring), for any table."""
    return {
        "hoodie.embed.timeline.server": str(embedded).lower(),
        "hoodie.write.markers.type": "TIMELINE_SERVER_BASED" if embedded else "DIRECT",
    }


@dataclass(frozen=True)
class HudiTableConfig:
    base_path: str
    table_name: str = "cdc_events"
    table_type: str = "COPY_ON_WRITE"
    # The partition column ("": none). Takes effect when the table is created; an existing
    # table keeps the layout it records (``laid_out_as``).
    partition_field: str = ""
    delete_mode: O.DeleteMode = "hard"
    parallelism: int = 2
    compaction_delta_commits: int = 5  # MERGE_ON_READ: compact inline after this many
    index_type: str = "RECORD_INDEX"  # or "GLOBAL_SIMPLE"
    # The driver's timeline server listens on every interface: only where executors need it.
    embedded_timeline_server: bool = False
    # Each COPY_ON_WRITE commit's change set, written by the upsert beside the table
    # (cdc_lake/lake/change_sets.py): what the checks and the order items follow instead of
    # rescanning the table. Compressed Parquet, 4% of the bytes Hudi's change feed takes for
    # the same rows; readers prefer it where every commit has one.
    change_sets: bool = True
    # Hudi's change data capture: each commit also logs its records' before and after images
    # (cdc_lake/lake/changes.py), for readers that want Hudi's CDC queries. Uncompressed Avro:
    # most of the table's bytes (docs/benchmarks-log.md, issue 25). Off by default; takes effect
    # when the table is created, and a table created with it keeps it.
    change_feed: bool = False
    # Cost of a commit (docs/benchmarks-log.md, Tuning log; ``python -m bench.commit_cost``).
    # Base files in snappy rather than Hudi's default GZIP: copy-on-write rewrites a file on
    # every upsert that touches it, and snappy is cheaper to write and to read back.
    compression_codec: str = "snappy"
    # The metadata table's column statistics (partition stats follow them): only data skipping
    # reads them, and no reader of this table turns it on. Kept up to date on every commit.
    column_stats: bool = False
    # Plan the cleaner every this many commits instead of after each: it keeps the same file
    # versions (``hoodie.cleaner.commits.retained``), it only looks for them less often.
    clean_every_commits: int = 10
    # Production: Hudi's meta sync into this Glue database after each commit
    # (cdc_lake/aws/glue.py), with the partition fields of the layout written.
    glue_database: str | None = None
    # Passed through as they are.
    extra_options: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.table_type not in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            raise ValueError(
                f"table_type must be COPY_ON_WRITE or MERGE_ON_READ: {self.table_type!r}"
            )
        if self.delete_mode not in O.DELETE_MODES:
            raise ValueError(f"delete_mode must be 'hard' or 'soft': {self.delete_mode!r}")
        if self.index_type not in ("RECORD_INDEX", "GLOBAL_SIMPLE"):
            raise ValueError(
                f"index_type must be RECORD_INDEX or GLOBAL_SIMPLE: {self.index_type!r}"
            )
        if self.extra_options.get(META_FIELDS, "true").strip().lower() == "false":
            # Hudi documents a table without meta fields for append-only data only. With the
            # record index, 1.1.1 (and 1.2.0) writes no index entry for such a table: an update
            # lands beside its old row in another file group, and a key filter finds nothing
            # (docs/benchmarks-log.md, Tuning log, "No Hudi meta fields").
            raise ValueError(
                f"{META_FIELDS}=false is not supported: Hudi keeps no record index for a table "
                "without meta fields, so updates leave duplicates and key-filtered reads miss "
                "rows (Hudi supports it for append-only data only)"
            )

    def laid_out_as(self, recorded: str | None) -> HudiTableConfig:
        """This config with the partitioning an existing table records (``recorded``, from
        ``recorded_partition_field``; None: no table yet, the setting holds). Hudi cannot change
        a table's layout in place, and refuses a write whose key generator differs."""
        if recorded is None or recorded == self.partition_field:
            return self
        return replace(self, partition_field=recorded)

    def write_options(
        self, checkpoint: dict[str, Any] | None = None, *, schema: LakeSchema
    ) -> dict[str, str]:
        """The options of an upsert into the table whose key ``schema`` names."""
        p = str(self.parallelism)
        opts = {
            "hoodie.table.name": self.table_name,
            "hoodie.datasource.write.table.name": self.table_name,
            "hoodie.datasource.write.table.type": self.table_type,
            "hoodie.datasource.write.operation": "upsert",
            **O.merge_options(schema.keys),
            "hoodie.upsert.shuffle.parallelism": p,
            "hoodie.insert.shuffle.parallelism": p,
            "hoodie.delete.shuffle.parallelism": p,
            "hoodie.bulkinsert.shuffle.parallelism": p,
            "hoodie.datasource.write.hive_style_partitioning": "true",
            **timeline_server_options(self.embedded_timeline_server),
            "hoodie.parquet.compression.codec": self.compression_codec,
            "hoodie.metadata.index.column.stats.enable": str(self.column_stats).lower(),
            "hoodie.clean.max.commits": str(self.clean_every_commits),
        }
        if len(schema.keys) > 1:
            # A composite key: its record key is "col:value,col:value", with or without a
            # partition column.
            opts |= {
                "hoodie.datasource.write.partitionpath.field": self.partition_field,
                "hoodie.datasource.write.keygenerator.class": (
                    "org.apache.hudi.keygen.ComplexKeyGenerator"
                ),
            }
        elif self.partition_field:
            opts |= {
                "hoodie.datasource.write.partitionpath.field": self.partition_field,
                "hoodie.datasource.write.keygenerator.class": (
                    "org.apache.hudi.keygen.SimpleKeyGenerator"
                ),
            }
        else:
            opts |= {
                "hoodie.datasource.write.partitionpath.field": "",
                "hoodie.datasource.write.keygenerator.class": (
                    "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
                ),
            }
        # Both indexes are global: a key is unique across partitions, and moves between them.
        # Reconciling a move reads every record of each file group a batch touches, most of a
        # large table (docs/benchmarks-log.md, issue 25): only where a key can change partition.
        moves = str(bool(self.partition_field)).lower()
        if self.index_type == "RECORD_INDEX":
            opts |= {
                "hoodie.index.type": "RECORD_INDEX",
                "hoodie.metadata.enable": "true",
                "hoodie.metadata.record.index.enable": "true",
                "hoodie.record.index.update.partition.path": moves,
                # The record index looks keys up in the metadata table: nothing reads the bloom
                # filter Hudi would write into every base file's footer, hashing every key. Off:
                # the upsert at 1M events 0.96x in the fairer of two paired reps (0.91x their
                # median), the table's bytes 0.91x; a small commit 0.94x, within its noise
                # (docs/benchmarks-log.md, Tuning log, issue 52). Files written before keep theirs.
                "hoodie.parquet.bloom.filter.enabled": "false",
            }
        else:
            opts |= {
                "hoodie.index.type": "GLOBAL_SIMPLE",
                "hoodie.simple.index.update.partition.path": moves,
            }
        if self.table_type == "MERGE_ON_READ":
            opts |= {
                # Batch writes compact inline; async compaction is for streaming writers.
                "hoodie.datasource.compaction.async.enable": "false",
                "hoodie.compact.inline": "true",
                "hoodie.compact.inline.max.delta.commits": str(self.compaction_delta_commits),
            }
        if self.change_feed:
            opts |= CHANGE_FEED_OPTIONS
        if self.glue_database:
            opts |= glue_sync_options(self.glue_database, self.table_name, self.partition_field)
        if checkpoint is not None:
            # Options starting with "_" become the commit's extra metadata.
            opts[CHECKPOINT_KEY] = json.dumps(checkpoint, sort_keys=True)
        if schema is not None:
            # The evolved columns and schema version, committed with the data they describe.
            opts[SCHEMA_KEY] = schema_json(schema)
        return {**opts, **self.extra_options}
