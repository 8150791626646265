"""Reading a lake table: its current snapshot, a time-travel view as of a commit, and the
records of the commits completed in a range (Hudi's incremental view)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_table(spark: SparkSession, base_path: str, **options: str) -> DataFrame:
    """The current snapshot (or, with options, a time-travel or incremental view)."""
    return spark.read.format("hudi").options(**options).load(base_path)


def read_as_of(spark: SparkSession, base_path: str, instant: str) -> DataFrame:
    return read_table(spark, base_path, **{"as.of.instant": instant})


def read_incremental(
    spark: SparkSession, base_path: str, begin_instant: str, end_instant: str | None = None
) -> DataFrame:
    """Records written by commits that completed after ``begin_instant`` and up to
    ``end_instant`` (inclusive). Hudi 1.x ranges over completion times: pass
    ``CommitInfo.completed``."""
    opts = {
        "hoodie.datasource.query.type": "incremental",
        "hoodie.datasource.read.begin.instanttime": begin_instant,
    }
    if end_instant:
        opts["hoodie.datasource.read.end.instanttime"] = end_instant
    return read_table(spark, base_path, **opts)
