"""A Hudi table read from the driver through Hudi's and Hadoop's JVM API (py4j): its timeline and
commits, its table config, the files a commit wrote. What an upsert writes (the table's options,
the checkpoint and schema it commits with the data) is ``cdc_lake/lake/hudi.py``.

- **Commits.** ``completed_commits`` reads the completed commits of the active timeline (commit,
  deltacommit, replacecommit) lazily, oldest or newest first; ``latest_commit``,
  ``commits_between``, ``latest_checkpoint`` and ``latest_schema`` read newest first, only as far
  back as they need. Each is a ``CommitInfo``: its instant (requested time, what time travel
  takes), its completion time (what incremental queries range over), its counts and its extra
  metadata, which holds the ingestion checkpoint and the table's schema.
- **The table.** Whether it exists, the partition field it was created with, whether it has the
  change feed and whether that feed still covers every commit after a given one, its data columns.
- **Files.** The base files a commit wrote (``file_writes``), and the file system helpers the
  change sets use (``path_exists``, ``list_dirs``, ``delete_path``).

``cdc_lake/lake/timeline.py`` reads the newest commit from S3 without Spark; both name the same
instant.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cdc_lake.lake.checkpoint import CHECKPOINT_KEY
from cdc_lake.lake.schema import SCHEMA_KEY, LakeSchema

T = TypeVar("T")

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _jvm(spark: SparkSession) -> tuple[Any, Any]:
    """py4j's view of the JVM and the Hadoop configuration (untyped by nature)."""
    sc: Any = spark.sparkContext
    return sc._jvm, sc._jsc.hadoopConfiguration()


def _meta_client(spark: SparkSession, base_path: str) -> Any:
    jvm, hadoop_conf = _jvm(spark)
    conf = jvm.org.apache.hudi.storage.hadoop.HadoopStorageConfiguration(hadoop_conf)
    return (
        jvm.org.apache.hudi.common.table.HoodieTableMetaClient.builder()
        .setConf(conf)
        .setBasePath(base_path)
        .build()
    )


def table_exists(spark: SparkSession, base_path: str) -> bool:
    return path_exists(spark, f"{base_path.rstrip('/')}/.hoodie/hoodie.properties")


def recorded_partition_field(spark: SparkSession, base_path: str) -> str | None:
    """The partition field the table at ``base_path`` was created with ("": none); None when
    there is no table."""
    if not table_exists(spark, base_path):
        return None
    fields = _meta_client(spark, base_path).getTableConfig().getPartitionFieldProp()
    return str(fields or "")


def has_change_feed(spark: SparkSession, base_path: str) -> bool:
    """Whether the table was created with the change feed (``hoodie.table.cdc.enabled``)."""
    if not table_exists(spark, base_path):
        return False
    return bool(_meta_client(spark, base_path).getTableConfig().isCDCEnabled())


def change_feed_gap(spark: SparkSession, base_path: str, after_instant: str) -> str | None:
    """Why the change feed may not hold every change after the commit ``after_instant``
    (requested time), or None when it does: the table has no feed, is not COPY_ON_WRITE (a
    MERGE_ON_READ feed is exact but costs a read of each file slice a delta commit touched:
    "Table types" in ``cdc_lake/lake/changes.py``), that commit has left the active timeline
    (archived), or the cleaner has removed file versions, and with them change logs, of commits
    after it. Callers then read the snapshot instead."""
    if not has_change_feed(spark, base_path):
        return "the table has no change feed"
    client = _meta_client(spark, base_path)
    table_type = str(client.getTableType().name())
    if table_type != "COPY_ON_WRITE":
        return (
            f"the table is {table_type}: its change feed costs a read of the file slices it"
            " touched, so the snapshot is read instead"
        )
    timeline = client.getActiveTimeline()
    if not timeline.getCommitsTimeline().filterCompletedInstants().containsInstant(after_instant):
        return f"commit {after_instant} is no longer in the active timeline"
    cleans = timeline.getCleanerTimeline().filterCompletedInstants().lastInstant()
    if cleans.isPresent():
        retained = timeline.readCleanMetadata(cleans.get()).getEarliestCommitToRetain()
        if retained and str(retained) > after_instant:
            return f"the cleaner kept only the file versions of commits from {retained} on"
    return None


def path_exists(spark: SparkSession, path: str) -> bool:
    jvm, hadoop_conf = _jvm(spark)
    p = jvm.org.apache.hadoop.fs.Path(path)
    return bool(p.getFileSystem(hadoop_conf).exists(p))


def list_dirs(spark: SparkSession, path: str) -> list[str]:
    """The names of the directories directly under ``path`` (none if it does not exist)."""
    jvm, hadoop_conf = _jvm(spark)
    p = jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(hadoop_conf)
    if not fs.exists(p):
        return []
    return [str(s.getPath().getName()) for s in fs.listStatus(p) if s.isDirectory()]


def delete_path(spark: SparkSession, path: str) -> None:
    jvm, hadoop_conf = _jvm(spark)
    p = jvm.org.apache.hadoop.fs.Path(path)
    p.getFileSystem(hadoop_conf).delete(p, True)


@dataclass(frozen=True)
class FileWrite:
    """A file group one commit wrote: its new base file and the one it replaced (None for a
    new file group), both relative to the table's base path."""

    partition: str
    file_id: str
    path: str
    previous: str | None


def file_writes(spark: SparkSession, base_path: str, instant: str) -> list[FileWrite]:
    """The base files a completed COPY_ON_WRITE commit wrote, from its metadata, each with the
    version it replaced (found by listing the file group's partition once)."""
    jvm, hadoop_conf = _jvm(spark)
    client = _meta_client(spark, base_path)
    timeline = client.getActiveTimeline().getCommitsTimeline().filterCompletedInstants()
    found = [i for i in timeline.getInstants() if str(i.requestedTime()) == instant]
    if not found:
        raise ValueError(f"{base_path}: no completed commit {instant}")
    stats = list(timeline.readCommitMetadata(found[0]).getWriteStats())
    base = base_path.rstrip("/")
    listed: dict[str, list[str]] = {}

    def names_in(partition: str) -> list[str]:
        if partition not in listed:
            path = jvm.org.apache.hadoop.fs.Path(f"{base}/{partition}" if partition else base)
            fs = path.getFileSystem(hadoop_conf)
            listed[partition] = [str(s.getPath().getName()) for s in fs.listStatus(path)]
        return listed[partition]

    out = []
    for stat in stats:
        partition, file_id = str(stat.getPartitionPath() or ""), str(stat.getFileId())
        prev = stat.getPrevCommit()
        previous = None
        if prev is not None and str(prev) not in ("null", ""):
            # Base files are named <file id>_<write token>_<instant>.parquet.
            suffix = f"_{prev}.parquet"
            match = sorted(
                n for n in names_in(partition) if n.startswith(f"{file_id}_") and n.endswith(suffix)
            )
            if not match:
                raise FileNotFoundError(
                    f"{base_path}: commit {instant} replaced file group {file_id} of its version "
                    f"{prev}, which is no longer in {partition or 'the base path'}"
                )
            previous = f"{partition}/{match[0]}" if partition else match[0]
        out.append(FileWrite(partition, file_id, str(stat.getPath()), previous))
    return out


@dataclass(frozen=True)
class CommitInfo:
    instant: str  # requested time: the instant's name, used by time travel (as.of.instant)
    completed: str  # completion time: what Hudi 1.x incremental queries range over
    action: str
    inserts: int
    updates: int
    deletes: int
    files_written: int
    bytes_written: int
    extra: dict[str, str]

    @property
    def checkpoint(self) -> dict[str, Any] | None:
        raw = self.extra.get(CHECKPOINT_KEY)
        return json.loads(raw) if raw else None

    @property
    def schema(self) -> LakeSchema | None:
        raw = self.extra.get(SCHEMA_KEY)
        return LakeSchema.from_json(json.loads(raw)) if raw else None


def _commit_info(timeline: Any, instant: Any) -> CommitInfo:
    meta = timeline.readCommitMetadata(instant)
    return CommitInfo(
        instant=str(instant.requestedTime()),
        completed=str(instant.getCompletionTime()),
        action=str(instant.getAction()),
        inserts=int(meta.fetchTotalInsertRecordsWritten()),
        updates=int(meta.fetchTotalUpdateRecordsWritten()),
        deletes=int(meta.getTotalRecordsDeleted()),
        files_written=int(meta.fetchTotalFiles()),
        bytes_written=int(meta.fetchTotalBytesWritten()),
        extra={str(k): str(v) for k, v in dict(meta.getExtraMetadata()).items()},
    )


def completed_commits(spark: SparkSession, base_path: str, newest_first: bool = False):
    """Completed commits (commit, deltacommit, replacecommit), read lazily."""
    if not table_exists(spark, base_path):
        return
    client = _meta_client(spark, base_path)
    timeline = client.getActiveTimeline().getCommitsTimeline().filterCompletedInstants()
    instants = list(timeline.getInstants())
    for instant in reversed(instants) if newest_first else instants:
        yield _commit_info(timeline, instant)


def commits_since(newest_first: Iterator[CommitInfo], instant: str) -> list[CommitInfo] | None:
    """The commits of ``newest_first`` (the rest of a newest-first timeline) before ``instant``;
    None if ``instant`` is not among them (archived, rolled back, or another table's)."""
    newer = []
    for commit in newest_first:
        if commit.instant == instant:
            return newer
        newer.append(commit)
    return None


def commits_between(
    spark: SparkSession, base_path: str, after_instant: str, upto_instant: str
) -> list[CommitInfo] | None:
    """The completed commits after ``after_instant`` up to ``upto_instant`` (requested times),
    newest first; None if ``after_instant`` is not on the active timeline."""
    newer = commits_since(completed_commits(spark, base_path, newest_first=True), after_instant)
    if newer is None:
        return None
    return list(itertools.dropwhile(lambda c: c.instant != upto_instant, newer))


def latest_commit(spark: SparkSession, base_path: str) -> CommitInfo | None:
    return next(completed_commits(spark, base_path, newest_first=True), None)


def newest_recorded(
    spark: SparkSession, base_path: str, parse: Callable[[Mapping[str, str]], T | None]
) -> T | None:
    """What ``parse`` reads from the extra metadata of the newest completed commit in which it
    finds something (a table kept in step with another records the commit it reached); None
    when no commit has it, or there is no table."""
    for commit in completed_commits(spark, base_path, newest_first=True):
        if (found := parse(commit.extra)) is not None:
            return found
    return None


def latest_schema(spark: SparkSession, base_path: str) -> LakeSchema | None:
    """The schema the newest commit that recorded one holds (None: none did)."""
    for commit in completed_commits(spark, base_path, newest_first=True):
        if commit.schema is not None:
            return commit.schema
        if commit.checkpoint is not None:
            return None  # an ingest commit from before schemas were recorded
    return None


def data_column_types(
    spark: SparkSession, base_path: str, lake_only: tuple[str, ...]
) -> dict[str, str]:
    """An existing table's data columns and their Spark types, in the table's order (Hudi's
    meta columns and the ``lake_only`` ones left out)."""
    fields = spark.read.format("hudi").load(base_path).schema.fields
    return {
        f.name: f.dataType.simpleString()
        for f in fields
        if not f.name.startswith("_hoodie_") and f.name not in lake_only
    }


def latest_checkpoint(spark: SparkSession, base_path: str) -> dict[str, Any]:
    """The cursor of the newest commit that carries one (compactions carry none). Only the
    newest commits are read, not the whole timeline."""
    for commit in completed_commits(spark, base_path, newest_first=True):
        if commit.checkpoint is not None:
            return commit.checkpoint
    return {}
