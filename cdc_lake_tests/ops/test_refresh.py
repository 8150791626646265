"""``cdc-lake refresh`` on the session stack: changes committed just before the call are in the
lake after it (``matches_source`` passes in the run, which it would not if the refresh had not
waited for Debezium and the sink), through one ``lake_refresh`` run on the configured instance,
tagged as the refresh's, and the same for the other captured table (``datalake.customers``)
through its own ``customers_lake_refresh``; a second call finds nothing new."""

from __future__ import annotations

import os
import re
import time

import dagster as dg
import psycopg2

from bench.outbox import HUDI_KEY, lake_refresh_job
from cdc_lake.defs.keys import table_keys
from cdc_lake.defs.lake.lag import LAG_CHECK, lag_check
from cdc_lake.ops.instance import TRIGGER_TAG, check_evaluations, dagster_env, materializations
from cdc_lake.ops.refresh import run_refresh
from cdc_lake.resources.local import local_resources
from cdc_lake.source.captured import CUSTOMERS, OUTBOX
from cdc_lake.source.workload import Workload
from cdc_lake.stack import LocalStack
from cdc_lake.streaming.topics import end_offsets, wait_for_consumer, wait_for_offsets


def test_refresh_catches_up_through_lake_refresh(
    local_stack: LocalStack, ingested, tmp_path, monkeypatch, capsys
):
    settings = local_stack.settings
    home = tmp_path / "dagster_home"
    # run_refresh sets these in the process environment: restore them afterwards.
    for name in dagster_env(settings, home):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    conn = psycopg2.connect(settings.pg_dsn())
    try:
        applied = Workload(conn, seed=1212).run(12, rate_per_s=0)  # committed right now
        with conn.cursor() as cur:  # and a change of the other captured table
            cur.execute(
                "UPDATE datalake.customers SET phone = 'refresh ' || customer_id "
                "WHERE customer_id = (SELECT min(customer_id) FROM datalake.customers)"
            )
        conn.commit()
    finally:
        conn.close()
    assert applied

    assert run_refresh(settings, timeout_s=240) == 0
    out = capsys.readouterr().out
    instance = dg.DagsterInstance.from_config(str(home))
    runs = {r.dagster_run.job_name: r.dagster_run for r in instance.get_run_records()}
    customers = table_keys(CUSTOMERS)
    assert set(runs) == {lake_refresh_job.name, customers.refresh_job}
    # The customers' own run: its Hudi table took the change and equals its source table.
    theirs = runs[customers.refresh_job]
    assert theirs.status == dg.DagsterRunStatus.SUCCESS
    assert {e.check_name: e.passed for e in check_evaluations(instance, theirs.run_id)}[
        "matches_source"
    ]
    took = materializations(instance, theirs.run_id)[customers.hudi].metadata["events_upserted"]
    assert isinstance(took.value, int) and took.value >= 1
    run = runs[lake_refresh_job.name]
    assert run.status == dg.DagsterRunStatus.SUCCESS
    assert run.tags[TRIGGER_TAG] == "cdc-lake refresh"
    checks = {e.check_name: e for e in check_evaluations(instance, run.run_id)}
    assert checks["matches_source"].passed, checks["matches_source"].description
    upserted = materializations(instance, run.run_id)[HUDI_KEY].metadata["events_upserted"]
    assert isinstance(upserted.value, int) and upserted.value >= 1
    hudi_line = next(line for line in out.splitlines() if HUDI_KEY.to_user_string() in line)
    assert f"events_upserted {upserted.value:,}" in hudi_line, out
    assert f"{run.run_id} succeeded" in out
    assert re.search(r"\[refresh\]   checks: \d+ of \d+ passed", out), out
    # Caught up: nothing waits for the lake, and its newest change is the workload's, just now.
    lag = {k: v.value for k, v in checks[LAG_CHECK].metadata.items()}
    assert checks[LAG_CHECK].passed and lag["pending_lag_seconds"] == 0.0, lag
    assert isinstance(lag["applied_lag_seconds"], float) and lag["applied_lag_seconds"] < 600
    assert "lag: oldest change not yet in the lake 0 s; newest applied" in out, out

    # Nothing committed since: the second refresh ingests nothing and still matches.
    ends = end_offsets(settings.kafka_client_conf(settings.kafka_tester_user),
                       local_resources(settings)["cdc"].topic_of(OUTBOX))  # fmt: skip
    assert run_refresh(settings, timeout_s=240) == 0
    again = [
        r.dagster_run
        for r in instance.get_run_records(dg.RunsFilter(job_name=lake_refresh_job.name))
    ][0]
    assert again.run_id != run.run_id
    meta = materializations(instance, again.run_id)[HUDI_KEY].metadata
    assert meta["events_upserted"].value == 0
    out = capsys.readouterr().out
    hudi_line = next(line for line in out.splitlines() if HUDI_KEY.to_user_string() in line)
    assert "nothing new (still at commit" in hudi_line, out
    assert {e.check_name: e.passed for e in check_evaluations(instance, again.run_id)}[
        "matches_source"
    ]

    # A change in the raw files, not yet refreshed: the oldest one waiting is as old as it is.
    conn = psycopg2.connect(settings.pg_dsn())
    try:
        Workload(conn, seed=1213).run(1, rate_per_s=0)
    finally:
        conn.close()
    cdc = local_resources(settings)["cdc"]
    kafka_conf = settings.kafka_client_conf(settings.kafka_tester_user)
    wait_for_offsets(kafka_conf, cdc.topic_of(OUTBOX), sum(ends.values()) + 1, timeout_s=120)
    wait_for_consumer(kafka_conf, cdc.sink_consumer_group, cdc.topic_of(OUTBOX), 120)
    time.sleep(2)
    tiny = local_resources(settings, lag_warn_seconds=1.0)
    check = lag_check(table_keys(OUTBOX))
    context = dg.build_asset_check_context(instance=instance)
    behind = check(context, s3=tiny["s3"], kafka=tiny["kafka"], cdc=tiny["cdc"])
    assert isinstance(behind, dg.AssetCheckResult)
    assert not behind.passed and behind.severity == dg.AssetCheckSeverity.WARN
    pending = behind.metadata["pending_lag_seconds"].value
    assert isinstance(pending, float) and 2 <= pending < 300, behind.metadata


def test_refresh_exits_1_naming_the_failed_check(
    local_stack: LocalStack, ingested, resources, tmp_path, monkeypatch, capsys
):
    """An outbox change that never reaches the topic (made while the outbox is out of the
    publication) leaves the lake behind with nothing pending: ``matches_source`` fails with
    ERROR, and the refresh exits 1 naming the check. The order's next published change brings
    the lake back, and the refresh then exits 0."""
    settings = local_stack.settings
    home = tmp_path / "dagster_home"
    for name in dagster_env(settings, home):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    publication = resources["cdc"].publication
    conn = psycopg2.connect(settings.pg_dsn())
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT min(order_id) FROM datalake.cdc_events")
            row = cur.fetchone()
            assert row and row[0] is not None
            order_id = row[0]
            cur.execute(f"ALTER PUBLICATION {publication} DROP TABLE datalake.cdc_events")
            cur.execute(
                "UPDATE datalake.cdc_events SET updated_at = updated_at + interval '1 second'"
                " WHERE order_id = %s",
                (order_id,),
            )
            cur.execute(f"ALTER PUBLICATION {publication} ADD TABLE datalake.cdc_events")
        conn.commit()
    finally:
        conn.close()

    assert run_refresh(settings, timeout_s=240) == 1
    captured = capsys.readouterr()
    assert "checks failed: " in captured.err, captured
    assert "hudi/datalake/cdc_events:matches_source" in captured.err, captured
    assert "matches_source FAILED (ERROR)" in captured.out, captured.out

    # The order's next change is published: the refresh ingests it and the lake matches again.
    conn = psycopg2.connect(settings.pg_dsn())
    try:
        with conn.cursor() as cur:
            cur.execute(
                "UPDATE datalake.orders SET freight = freight + 1 WHERE order_id = %s", (order_id,)
            )
        conn.commit()
    finally:
        conn.close()
    assert run_refresh(settings, timeout_s=240) == 0
    instance = dg.DagsterInstance.from_config(str(home))
    last = [
        r.dagster_run
        for r in instance.get_run_records(dg.RunsFilter(job_name=lake_refresh_job.name))
    ][0]
    assert {e.check_name: e.passed for e in check_evaluations(instance, last.run_id)}[
        "matches_source"
    ]
    assert materializations(instance, last.run_id)[HUDI_KEY].metadata["events_upserted"].value >= 1
