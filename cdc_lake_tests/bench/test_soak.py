"""The soak benchmark at its smoke size (2 commits, a sample after each) on the suite's stack: the
runs' Spark apps go to the lake server, every sample has each figure, and after catch-up the lake
matches the source. No timing is asserted. And the pure parts: which sample a growth figure
compares with, and the samples' table."""

from __future__ import annotations

import json
import math
from pathlib import Path

from bench.__main__ import run
from bench.soak import SERVERS, Sample, growth, samples_table
from cdc_lake.stack import LocalStack


def _sample(commits: int, value: float) -> Sample:
    return Sample(
        commits=commits, minutes=commits / 4, load=1.0, hudi_s=value, items_s=1.0, run_s=2.0,
        server_rss_mb=value, heap_mb=100.0, jvm_threads=50, threads=dict.fromkeys(SERVERS, 9),
        fds=dict.fromkeys(SERVERS, 7), timeline_files=3, archived_files=1, metadata_files=20,
        data_files=commits, dagster_mb=commits / 2, event_log_mb=commits / 3, runs=commits,
        wal_retained_mb=0.1, sink_lag=0,
    )  # fmt: skip


def test_growth_compares_the_last_sample_with_the_one_at_a_tenth_of_the_run():
    samples = [_sample(c, v) for c, v in ((0, math.nan), (100, 9.0), (200, 8.0), (2000, 8.8))]
    base, ratio = growth(samples, lambda s: s.hudi_s)
    assert base.commits == 200 and ratio == 8.8 / 8.0
    # A short run: the first sample after commit 0.
    base, ratio = growth(samples[:2], lambda s: s.server_rss_mb)
    assert base.commits == 100 and ratio == 1.0


def test_the_samples_table_has_a_column_for_every_figure():
    table = samples_table([_sample(0, math.nan), _sample(50, 7.5)]).splitlines()
    head, rule, rows = table[0], table[1], table[2:]
    columns = head.count("|") - 1
    assert rule.count("---") == columns and len(rows) == 2
    assert all(row.count("|") - 1 == columns for row in rows)
    assert rows[1].startswith("| 50 | 12.5 | 1.0 | 7.50 |") and "| 9/9/9 | 7/7/7 |" in rows[1]


def test_the_soak_runs_on_the_lake_server_and_ends_matching_the_source(
    local_stack: LocalStack, secret_env, tmp_path: Path
):
    samples_file = tmp_path / "samples.jsonl"
    report = run(local_stack, ["soak"], smoke=True, reps=1, soak_samples=samples_file)
    figures = {f.name: f for f in report.figures if f.benchmark == "soak"}
    assert figures["matches_source after catch-up"].value == 1
    assert figures["checks failed with ERROR"].value == 0
    # A sample before the first commit, one after each of the 2, and one after catch-up, each
    # written as it was taken.
    written = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert [s["commits"] for s in written][:3] == [0, 1, 2] and len(written) == 4
    for s in written[1:]:
        if s is not written[-1]:  # catch-up may need no commit: no step time to report
            assert s["hudi_s"] > 0 and s["items_s"] > 0
        assert s["server_rss_mb"] > 100
        assert s["heap_mb"] > 0 and s["jvm_threads"] > 1
        assert all(s["threads"][n] > 0 and s["fds"][n] > 0 for n in SERVERS)
        assert s["timeline_files"] > 0 and s["metadata_files"] > 0 and s["data_files"] > 0
        assert s["runs"] >= 2 and s["dagster_mb"] > s["event_log_mb"] > 0
    # Each commit is one more run in the instance, and the timeline holds each commit.
    assert written[2]["runs"] - written[1]["runs"] >= 1
    assert written[2]["timeline_files"] > written[1]["timeline_files"]
    assert figures["Dagster instance per run"].value > 0
    # At the end, dagster_runs_prune's rules on the soak's instance: the older runs go, the
    # lake's checkpoint (its latest materialization) stays, and the instance is smaller.
    pruned = figures["runs pruned (dagster_runs_prune's rules)"]
    assert pruned.value >= 2 and "keeping the newest 2" in pruned.note
    after = figures["Dagster instance after the prune"]
    assert after.note.endswith("checkpoint kept")
    assert 0 < after.value < float(after.note.split(" MB before")[0])
    assert report.sections and report.sections[0].count("\n| ") == len(written) + 1
