"""``cdc-lake demo``: the README's main job, the whole pipeline on the local stack.

1. install what is missing and bring the stack up;
2. materialise all five assets (sample data loaded on the way) with their checks;
3. apply a few changes with the workload, wait for the S3 sink to flush them, and let the raw
   files sensor request the lake refresh, which then runs;
4. print a summary, and the ``dg dev`` command that opens the Dagster UI on the same instance.

Runs are recorded in the Dagster instance at ``<state>/dagster_home``, so the UI shows them.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

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
    from cdc_lake.defs.lake.assets import HUDI_KEY
    from cdc_lake.defs.lake.sensors import SENSOR_RESOURCES, raw_cdc_files_sensor
    from cdc_lake.defs.marts.assets import ORDER_ITEMS_KEY
    from cdc_lake.lake.hudi import completed_commits
    from cdc_lake.resources import local_resources, local_secret_env
    from cdc_lake.source.workload import Workload
    from cdc_lake.streaming.topics import wait_for_consumer

    os.environ.update(local_secret_env(settings))
    home = settings.state_dir / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(home)
    instance = dg.DagsterInstance.get()
    definitions = load_defs() if callable(load_defs) else load_defs
    resources = local_resources(settings)
    assets = [a for a in definitions.assets or [] if isinstance(a, dg.AssetsDefinition)]
    checks = list(definitions.asset_checks or [])

    print("[demo] materialising all five assets with their checks", flush=True)
    first = dg.materialize(
        [*assets, *checks], resources=resources, instance=instance, run_config=QUIET
    )
    if not first.success:
        return 1
    _print_checks(first)

    print(f"[demo] applying {changes} changes with the workload", flush=True)
    conn = psycopg2.connect(settings.pg_dsn())
    try:
        applied = Workload(conn, seed=int(time.time())).run(changes, rate_per_s=10)
    finally:
        conn.close()
    cdc = resources["cdc"]
    time.sleep(2)  # let Debezium publish the last changes before waiting on the sink
    wait_for_consumer(resources["kafka"].client_conf(), cdc.sink_consumer_group, cdc.topic, 120)
    # A fresh sensor cursor: the tick sees every raw object, and batches them into one run.
    only = {k: resources[k] for k in SENSOR_RESOURCES}
    tick = raw_cdc_files_sensor(dg.build_sensor_context(instance=instance, resources=only))
    if not isinstance(tick, dg.SensorResult) or not tick.run_requests:
        print(f"[demo] the sensor requested no run: {tick}")
        return 1
    request = tick.run_requests[0]
    print(f"[demo] sensor requested a lake refresh ({request.tags})", flush=True)
    second = dg.materialize(
        [*assets, *checks],
        selection=dg.AssetSelection.assets(HUDI_KEY, ORDER_ITEMS_KEY),
        resources=resources,
        instance=instance,
        tags=dict(request.tags),
        run_config=QUIET,
    )
    if not second.success:
        return 1
    _print_checks(second)

    from cdc_lake.jobs.lake_jobs import customer_rows
    from cdc_lake.lake.ingest import read_table

    session = _spark(resources["pyspark"])
    lake = resources["lake"]
    table = read_table(session, lake.table_path)
    items = session.read.parquet(lake.order_items_path)
    stats = customer_rows(items)
    commits = list(completed_commits(session, lake.table_path))
    print()
    print("cdc-lake demo summary")
    print(f"  changes applied:  {len(applied)}")
    print(f"  hudi rows:        {table.count():,} ({lake.table_path})")
    print(f"  order items:      {items.count():,} ({lake.order_items_path})")
    print(f"  total revenue:    {float(items.agg({'revenue': 'sum'}).collect()[0][0] or 0):,.2f}")
    top = ", ".join(f"{s['customer_id']} {s['revenue']:,.0f}" for s in stats[:5])
    print(f"  top customers:    {top}")
    print("  commit instants:  " + ", ".join(c.instant for c in commits[-5:]))
    print(f"  took {time.monotonic() - t0:.0f}s")
    print()
    print("Open the Dagster UI on the same instance:")
    print(f"  {dg_dev_command(home)}")
    print("  then http://127.0.0.1:3000 (turn raw_cdc_files_sensor on under Automation)")
    print("Make more changes: .venv/bin/cdc-lake workload --changes 20")
    print("Stop the stack:    .venv/bin/cdc-lake stack down")
    return 0


def dg_dev_command(home: Path) -> str:
    """``dg dev`` on the demo's instance. In the checkout (a dg project: ``[tool.dg]`` in
    ``pyproject.toml``) dg builds the workspace itself; ``DAGSTER_HOME`` picks the instance."""
    root = project_root()
    cd = "" if Path.cwd().resolve() == root else f"cd {shlex.quote(str(root))} && "
    return f"{cd}DAGSTER_HOME={shlex.quote(str(home))} .venv/bin/dg dev"


def _print_checks(result) -> None:
    for e in result.get_asset_check_evaluations():
        state = "passed" if e.passed else f"FAILED ({e.severity.value})"
        print(f"[demo]   check {e.asset_key.to_user_string()}:{e.check_name} {state}")


def _spark(resource):
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from dagster_pyspark.resources import spark_session_from_config

    return spark_session_from_config(resource.spark_config)
