"""The commit-cost profiler once at a tiny size, so it keeps working: two tables, the defaults
and a variant that sets a table field (partitioned by year), take the same commits and end with the
same live rows, and the Spark event log attributes each commit's jobs and stages. It runs in a
process of its own (``python -m bench.commit_cost``): it needs a Spark session with its event
log on, and stops it at the end. No timing is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.peers import session_settings, variant_table
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake_tests.conftest import TEST_PORT_BASE


def test_commit_cost_profiles_commits_and_pairs_sides(tmp_path: Path):
    out = tmp_path / "commit.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.commit_cost", "--port-base", str(TEST_PORT_BASE + 800),
         "--history", "500", "--files", "1", "--changes", "5", "--rounds", "2",
         "--variant", 'part:cdc_lake.partition_field="order_year"', "--json", str(out)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    sides = json.loads(out.read_text())["sides"]
    assert set(sides) == {"default", "part"}
    # The variant's cdc_lake.FIELD set the table's field; the defaults' table kept its own.
    assert sides["part"]["fields"] == {"partition_field": "order_year"}
    assert sides["default"]["fields"] == {} and HudiTableConfig.partition_field == ""
    for name, side in sides.items():
        assert side["same_rows"], name  # the variant ended with the defaults' digest
        assert side["jobs_per_run"] > 0 and side["stages_per_run"] > 0, name
        assert side["ingest_s"] > 0 and side["checks_s"] > 0, name
        assert side["last_round_jobs"] and side["top_stages"], name
    assert sides["default"]["ingest_ratio"] == 1.0
    # After the first round, the checks follow the change feed, as the lake asset's do.
    assert "checks incremental" in proc.stderr


def test_a_sides_session_settings_hold_for_its_runs_only():
    # ``--variant 'NAME:spark.sql.KEY=VALUE'``: the side's setting, then the session's own again.
    class Conf:
        def __init__(self) -> None:
            self.values = {"spark.sql.a": "1"}

        def get(self, key: str, default: str | None = None) -> str | None:
            return self.values.get(key, default)

        def set(self, key: str, value: str) -> None:
            self.values[key] = value

        def unset(self, key: str) -> None:
            del self.values[key]

    class Spark:
        conf = Conf()

    spark = Spark()
    with session_settings(spark, {"spark.sql.a": "2", "spark.sql.b": "x"}):
        assert spark.conf.values == {"spark.sql.a": "2", "spark.sql.b": "x"}
    assert spark.conf.values == {"spark.sql.a": "1"}
    # ... and no Hudi option of the side's table.
    table = variant_table("s3a://lake/t", {"spark.sql.a": "2", "hoodie.x": "y"})
    assert table.extra_options == {"hoodie.x": "y"}
