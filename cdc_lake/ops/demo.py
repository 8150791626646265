"""``cdc-lake demo``: the README's main command, the whole pipeline on the local stack.

1. install what is missing and bring the stack up;
2. run ``cdc_pipeline``, every asset (sample data loaded on the way) with its checks, tagged as
   the demo's;
3. apply a few changes with the workload and wait for the S3 sink to flush them; then run the
   Dagster daemon with ``raw_cdc_files_sensor`` turned on until the one ``lake_refresh`` run
   it requests has ended, and turn the sensor off again (``cdc_lake/ops/instance.py``). The
   sensor's ticks, its cursor and the run (tagged with the sensor's name) are the instance's;
4. print where the run's time went (queue, run worker start, steps:
   ``cdc_lake/ops/run_timeline.py``), a summary, and the ``cdc-lake ui`` command that opens the
   Dagster UI on the same instance.

Runs are recorded in the Dagster instance at ``<state>/dagster_home``, so the UI shows them.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

from cdc_lake.ops.run_timeline import run_timeline
from cdc_lake.stack import LocalStack, StackSettings
from cdc_lake.stack.install import install
from cdc_lake.stack.settings import project_root

# Dagster's console at INFO: the assets' own lines, not every engine event (those stay in the
# instance's event log, so the UI shows them all).
QUIET = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}


def run_demo(settings: StackSettings, changes: int = 25) -> int:
    t0 = time.monotonic()
    install(settings)
    stack = LocalStack(settings)
    stack.up()

    import dagster as dg
    import psycopg2

    from cdc_lake.definitions import defs as load_defs
    from cdc_lake.defs.keys import table_keys
    from cdc_lake.defs.pipeline import cdc_pipeline_job
    from cdc_lake.lake.hudi_timeline import completed_commits
    from cdc_lake.marts.items_table import ItemsTableConfig
    from cdc_lake.ops.instance import (
        TRIGGER_TAG,
        check_evaluations,
        dagster_env,
        default_home,
        prepare_home,
        refresh_through_sensor,
    )
    from cdc_lake.resources.local import local_resources
    from cdc_lake.source.captured import TABLES, mart_table
    from cdc_lake.source.workload import Workload
    from cdc_lake.streaming.topics import wait_for_consumer

    home = prepare_home(default_home(settings))
    # This process's runs read the resources' EnvVars from here; the daemon's get the same
    # variables in their environment (dagster_env), never on a command line.
    os.environ.update(dagster_env(settings, home))
    instance = dg.DagsterInstance.get()
    definitions = load_defs() if callable(load_defs) else load_defs
    resources = local_resources(settings)

    print(f"[demo] materialising every asset with its checks ({cdc_pipeline_job.name})", flush=True)
    first = definitions.resolve_job_def(cdc_pipeline_job.name).execute_in_process(
        instance=instance, run_config=QUIET, tags={TRIGGER_TAG: "cdc-lake demo"}
    )
    if not first.success:
        return 1
    _print_checks(first.get_asset_check_evaluations())

    print(f"[demo] applying {changes} changes with the workload", flush=True)
    conn = psycopg2.connect(settings.pg_dsn())
    try:
        applied = Workload(conn, seed=int(time.time())).run(changes, rate_per_s=10)
    finally:
        conn.close()
    cdc = resources["cdc"]
    # The demo shows the order items: it refreshes the table they are built from.
    orders = mart_table(ItemsTableConfig.table_name)
    sensor = table_keys(orders).sensor
    time.sleep(2)  # let Debezium publish the last changes before waiting on the sink
    topic = cdc.topic_of(orders)
    wait_for_consumer(resources["kafka"].client_conf(), cdc.sink_consumer_group, topic, 120)
    print(f"[demo] sink flushed; turning {sensor} on with the Dagster daemon", flush=True)
    t1 = time.monotonic()
    try:
        run = refresh_through_sensor(settings, instance, sensor)
    except RuntimeError as e:
        print(f"[demo] the sensor's refresh failed: {e}", file=sys.stderr)
        return 1
    tags = {
        k: v for k, v in run.tags.items() if k in ("dagster/sensor_name", "cdc_lake/new_objects")
    }
    print(
        f"[demo] {run.job_name} run {run.run_id[:8]} {run.status.value.lower()} in "
        f"{time.monotonic() - t1:.0f}s, requested by the sensor ({tags}); sensor off again",
        flush=True,
    )
    print(f"[demo] where the run's time went: {run_timeline(instance, run.run_id).describe()}")
    if run.status != dg.DagsterRunStatus.SUCCESS:
        print(
            f"[demo] the lake refresh failed: open the UI ({ui_command_line(settings)})",
            file=sys.stderr,
        )
        return 1
    _print_checks(check_evaluations(instance, run.run_id))

    from cdc_lake.lake.readers import read_table
    from cdc_lake.marts.figures import customer_figures, customer_rows
    from cdc_lake.marts.order_items import read_order_items

    session = _spark(resources["pyspark"])
    lake = resources["lake"]
    table_path = lake.table_path_of(orders)
    table = read_table(session, table_path)
    items = read_order_items(session, lake.order_items_path)
    stats = customer_rows(customer_figures(items))
    commits = list(completed_commits(session, table_path))
    # Counted before the summary: Hudi's object sizer prints its "# WARNING" lines on first use.
    rows, lines = table.count(), items.count()
    revenue = float(items.agg({"revenue": "sum"}).collect()[0][0] or 0)
    print()
    print("cdc-lake demo summary")
    print(f"  changes applied:  {len(applied)}")
    print(f"  hudi rows:        {rows:,} ({table_path})")
    print(f"  order items:      {lines:,} ({lake.order_items_path})")
    print(f"  total revenue:    {revenue:,.2f}")
    top = ", ".join(f"{s['customer_id']} {s['revenue']:,.0f}" for s in stats[:5])
    print(f"  top customers:    {top}")
    for kept in (t for t in TABLES if t.history):
        path = lake.history_config(kept).base_path
        versions = read_table(session, path)
        current = versions.where("valid_to IS NULL").count()
        print(f"  {kept.name} history: {versions.count():,} versions, {current:,} current ({path})")
    print("  commit instants:  " + ", ".join(c.instant for c in commits[-5:]))
    print(f"  took {time.monotonic() - t0:.0f}s")
    print()
    print("Open the Dagster UI on the same instance:")
    print(f"  {ui_command_line(settings)}")
    print(f"  then open the URL it prints (turn {sensor} on under Automation)")
    print("Make more changes: .venv/bin/cdc-lake workload --changes 20")
    print("Catch up by hand:  .venv/bin/cdc-lake refresh")
    print("Stop the stack:    .venv/bin/cdc-lake stack down")
    return 0


def ui_command_line(settings: StackSettings) -> str:
    """How to open the UI on the demo's instance: ``cdc-lake ui``, which serves it behind the
    stack's token with the stack's settings in its environment, on ``<state>/dagster_home``."""
    root = project_root()
    cd = "" if Path.cwd().resolve() == root else f"cd {shlex.quote(str(root))} && "
    if settings.state_dir.resolve() != (root / ".cdc-lake").resolve():
        state = shlex.quote(str(settings.state_dir))
        return f"{cd}.venv/bin/cdc-lake --state-dir {state} ui"
    return f"{cd}.venv/bin/cdc-lake ui"


def _print_checks(evaluations) -> None:
    for e in evaluations:
        state = "passed" if e.passed else f"FAILED ({e.severity.value})"
        print(f"[demo]   check {e.asset_key.to_user_string()}:{e.check_name} {state}")


def _spark(resource):
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from dagster_pyspark.resources import spark_session_from_config

    return spark_session_from_config(resource.spark_config)
