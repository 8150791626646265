"""What a refresh did (``IngestResult``), and how each of its commits is written
(``write_commit``): one Hudi commit with the checkpoint and the schema in its metadata, then the
commit's change set. The refresh: ``cdc_lake/lake/ingest.py``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cdc_lake.lake.change_sets import write_change_set
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.hudi_timeline import CommitInfo, latest_commit, table_exists
from cdc_lake.lake.schema import LakeSchema
from cdc_lake.raw.objects import RawObject

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class IngestResult:
    committed: CommitInfo | None
    files: list[RawObject] = field(default_factory=list)
    events_read: int = 0
    events_upserted: int = 0
    lines_skipped: int = 0  # at or below the checkpoint: already in the table
    quarantined: int = 0
    quarantine_path: str | None = None
    checkpoint: dict[str, Any] = field(default_factory=dict)
    ignored_keys: list[str] = field(default_factory=list)
    offset_gaps: int = 0  # offsets missing between the checkpoint and the newest line
    snapshot_ts_ms: int | None = None  # a completed snapshot's time, when the batch ends one
    absent_from_snapshot: int = 0  # live orders that snapshot no longer held: deleted
    truncated_rows: int = 0  # live rows older than a truncate in the batch: deleted
    reconciled_rows: int = 0  # live rows whose key the source no longer held: deleted
    unavailable_lines: int = 0  # fresh lines holding Debezium's placeholder: filled in
    list_requests: int = 0
    seconds: float = 0.0
    schema: LakeSchema | None = None  # the lake's columns after this run
    # Stored live rows given the missing value of a column added with a default, and the names
    # of the columns they got; in a commit of the schema alone, also the columns added without
    # one (every stored row reads them as null).
    backfilled: int = 0
    backfilled_columns: tuple[str, ...] = ()
    # Rows of the commit's change set (cdc_lake/lake/change_sets.py); None: it has none, and
    # ``change_set_error`` may say why.
    change_set_rows: int | None = None
    change_set_error: str = ""
    # The partition field written ("": none), and why it is not the setting's, if it is not.
    partition_field: str = ""
    layout_note: str = ""

    def change_set_text(self) -> str:
        if self.committed is None:
            return "no new commit"
        if self.change_set_rows is not None:
            return f"{self.change_set_rows} rows"
        return f"none: {self.change_set_error or 'not written for this table'}"

    @property
    def bytes_read(self) -> int:
        return sum(f.size for f in self.files)


def write_commit(
    spark: SparkSession,
    rows: DataFrame,
    table: HudiTableConfig,
    checkpoint: dict[str, Any],
    schema: LakeSchema,
    result: IngestResult,
) -> None:
    """One Hudi commit of ``rows``, with the checkpoint and the schema in its metadata, then
    (COPY_ON_WRITE, but the table's first) its change set. The commit goes into ``result``."""
    options = table.write_options(checkpoint, schema=schema)
    # A table's first commit gets no change set: no reader follows it (a reader with no state
    # scans the table), and its set would copy every row the table holds.
    first = table.change_sets and not table_exists(spark, table.base_path)
    rows.write.format("hudi").options(**options).mode("append").save(table.base_path)
    result.committed = latest_commit(spark, table.base_path)
    cow = table.table_type == "COPY_ON_WRITE"
    if first:
        result.change_set_error = "the table's first commit (readers scan it in full)"
    elif table.change_sets and cow and result.committed is not None:
        # The data is committed: a change set that fails leaves the commit without one, which
        # readers see and fall back from (a rescan). The refresh itself succeeded.
        try:
            # The keys, and each one's change (its time closes a hard-deleted version).
            given = rows.select(*schema.keys, "cdc_source_ts_ms")
            result.change_set_rows = write_change_set(
                spark, table.base_path, result.committed, given, schema
            )
            if result.change_set_rows is None:
                result.change_set_error = "a file version the commit replaced is cleaned already"
        except Exception as e:  # py4j's errors carry Spark's and the file system's
            result.change_set_error = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
