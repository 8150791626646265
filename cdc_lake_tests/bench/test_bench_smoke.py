"""Each benchmark once at a tiny size, so the harness keeps working. No timing is asserted."""

from __future__ import annotations

import json

from bench.__main__ import run
from bench.harness import write_outputs
from bench.outbox import raw_cdc_files_sensor
from bench.scale import events_for
from cdc_lake.resources.streaming import CdcPipelineResource
from cdc_lake.stack import LocalStack


def test_benchmarks_run_and_report(local_stack: LocalStack, spark, secret_env, tmp_path):
    names = ["sensor", "incremental", "scale", "index", "refresh", "lag", "policy", "history"]
    # The refresh benchmark on the default table type only: MERGE_ON_READ takes the same
    # harness path with another option (and half a minute more).
    report = run(local_stack, names, smoke=True, reps=1, spark=spark)
    figures = {(f.benchmark, f.name): f for f in report.figures}
    ours = figures[("sensor tick", "cdc-lake LIST requests per tick")]
    full = figures[("sensor tick", "dagster_aws LIST requests per tick")]
    assert ours.value == 1 + 2  # one delimiter listing of the topic, then one per partition
    assert ours.note == "found 5 new"
    assert full.value >= 1
    # Lag: both sides refreshed, the check passed on the B side, and its step was timed.
    lag = {f.name: f for f in report.figures if f.benchmark == "lag"}
    assert lag["ratio with / without the lag check"].value > 0
    assert lag["the lag check's own step"].value > 0
    # Policy: both digests ran (over different columns, so they are not compared here).
    policy = {f.name: f for f in report.figures if f.benchmark == "policy"}
    assert policy["ratio with / without column policies"].value > 0
    # ... and the upsert into a table with the outbox's field policies and one without.
    assert policy["upsert ratio with / without field policies"].value > 0
    # History: the upsert and the history's build both ran.
    history = {f.name: f for f in report.figures if f.benchmark == "history"}
    assert history["ratio refresh with / without a history"].value > 1
    incremental = [f for f in report.figures if f.benchmark == "incremental"]
    assert len(incremental) == 2 and all(f.value > 0 for f in incremental)

    # Scale: the generator's live orders, counted here without Spark, are what both the Hudi
    # table and the Parquet floor hold.
    last: dict[int, bool] = {}
    for _, ev in events_for(2_000):
        last[ev["order_id"]] = ev["__deleted"] == "true"
    scale = {f.name: f for f in report.figures if f.benchmark == "scale"}
    rows = scale["live rows, 2,000 events"]
    assert rows.value == sum(not d for d in last.values()) and rows.note == "Hudi = Parquet"
    assert 0 < sum(last.values()) < len(last)  # some orders did end deleted
    assert scale["events/s, 2,000 events"].value > 0
    assert scale["driver peak RSS (upsert), 2,000 events"].value > 100

    # Index: both indexes ran on the smoke's one history and left identical tables.
    index = [f for f in report.figures if f.benchmark == "index"]
    per_table = [f for f in index if "new files into" in f.name]
    assert len(per_table) == 2 and all(f.value > 0 and f.note == "tables equal" for f in per_table)
    assert {f.name for f in index if "growth" in f.name} == {
        f"{name}: growth 100 vs 100 orders" for name in ("RECORD_INDEX", "GLOBAL_SIMPLE")
    }

    # Refresh: the same new work into a small and a big table, both committed (asserted inside);
    # per size, both steps and the upsert's own seconds.
    refresh = {f.name: f for f in report.figures if f.benchmark == "refresh"}
    assert len(refresh) == 3 + 2 * 3 and all(f.value > 0 for f in refresh.values())
    assert refresh["ratio 500 / 50 orders"].goal == "<= 1.2x"
    steps = [n for n in refresh if n.startswith("step ") and n.endswith(" 500 orders")]
    assert len(steps) == 3 and "step upsert (write only), 500 orders" in steps

    out_json, out_md = tmp_path / "r.json", tmp_path / "benchmarks.md"
    write_outputs(report, out_json, out_md, "python -m bench --smoke")
    payload = json.loads(out_json.read_text())
    assert payload["command"] == "python -m bench --smoke"
    assert len(payload["figures"]) == len(report.figures)
    assert "| sensor tick | cdc-lake LIST requests per tick |" in out_md.read_text()


def test_empty_run_benchmark_reports(local_stack: LocalStack, spark, secret_env):
    report = run(local_stack, ["empty"], smoke=True, reps=1, spark=spark)
    figures = {f.name: f for f in report.figures if f.benchmark == "empty run"}
    carried = figures["lake refresh with nothing new, 50 orders"]
    through_spark = figures["same run through Spark (as before), 50 orders"]
    assert carried.value > 0 and through_spark.value > 0
    assert figures["ratio carried / Spark path"].value == carried.value / through_spark.value


def test_latency_benchmark_measures_default_and_tuned(local_stack: LocalStack, spark, secret_env):
    """Both profiles in one run, each on its own pipeline: the default one with the settings
    declared in the code, the tuned one with its own; both trace changes end to end."""
    report = run(local_stack, ["latency"], smoke=True, reps=1, spark=spark)
    latency = {f.name: f for f in report.figures if f.benchmark == "e2e latency"}
    sink_default = CdcPipelineResource.model_fields["flush_interval_ms"].default
    sensor_default = raw_cdc_files_sensor.minimum_interval_seconds
    assert latency["default: p50 commit -> Hudi"].note.startswith(
        f"flush {sink_default / 1000:g}s, sensor {sensor_default:g}s"
    )
    assert latency["tuned: p50 commit -> Hudi"].note.startswith("flush 2s, sensor 5s")
    for profile, goal in (("default", "< 30 s"), ("tuned", "< 15 s")):
        assert latency[f"{profile}: changes traced"].value >= 1
        assert latency[f"{profile}: p95 commit -> Hudi"].value > 0
        assert latency[f"{profile}: p95 commit -> Hudi"].goal == goal
        runs = latency[f"{profile}: median Hudi run (tick -> materialized)"]
        assert runs.value > 0 and "runs" in runs.note
    for q in ("p50", "p95"):
        assert latency[f"ratio default / tuned, {q}"].value > 0


def test_warm_benchmark_runs_fresh_run_processes_both_ways(local_stack: LocalStack, secret_env):
    report = run(local_stack, ["warm"], smoke=True, reps=1)
    figures = {f.name: f for f in report.figures if f.benchmark == "warm"}
    assert len(figures) == 5 and all(f.value > 0 for f in figures.values())
    ratio = figures["run process: in process / server"]
    in_process = figures["run process, Spark in process, 2 files x 5 changes, 50 orders"]
    server = figures["run process, warm lake server, 2 files x 5 changes, 50 orders"]
    assert ratio.value == in_process.value / server.value
