"""The ``diff`` app: the rows that differ between the lake and the source, in the digest
buckets a check found different (``cdc_lake/lake/diff.py``). It reads, and writes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc_lake.lake.diff import differences
from cdc_lake.lake.ordering import live_rows
from cdc_lake.lake.readers import read_table
from cdc_lake.spark_apps.params import DiffParams, DiffReport
from cdc_lake.spark_apps.report import AppReport, meta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_diff(spark: SparkSession, params: DiffParams) -> AppReport:
    found = differences(
        spark,
        live_rows(read_table(spark, params.table_path)),
        params.source_rows_uri,
        params.schema,
        params.buckets,
        params.chosen,
    )
    return AppReport({DiffReport.DIFFERENCES: meta(found.to_json(), "json")})
