"""``cdc-lake refresh``: bring the lake up to date with everything committed in PostgreSQL up to
the call, through the ``lake_refresh`` job on the configured Dagster instance.

1. **Published.** The WAL position at the call (``pg_current_wal_lsn()``) lies past the commit of
   every transaction committed before it. The refresh waits until the connector's replication
   slot has ``confirmed_flush_lsn`` at or past it: Debezium acknowledges an LSN only after Kafka
   Connect has committed the source offsets up to it, that is after Kafka acknowledged those
   records. A quiet outbox does not stall this: Debezium's heartbeat (every
   ``heartbeat_interval_ms``) commits a transaction past the mark, which the slot then passes.
2. **Flushed.** Then each captured table's topic's end offsets as they are; it waits until the
   S3 sink's consumer group has committed them (the sink commits an offset only once its object
   is uploaded).
3. **Refreshed.** It runs ``lake_refresh`` (the outbox's Hudi table, then the order items, with
   their checks), then each other captured table's ``<table>_lake_refresh``, in this process on
   the instance at ``DAGSTER_HOME``, else ``<state>/dagster_home``, tagged
   ``cdc_lake/trigger=cdc-lake refresh``, so the run shows in the UI beside the sensor's. The job
   ingests from the lake's own checkpoint, so calling it twice ingests nothing twice.

It prints one line per stage, what the run ingested, the checks and the lake's lag in seconds
(the oldest change not yet in it, and the age of the newest it applied:
``cdc_lake/lake/lag.py``). Exit status: 0 when the run succeeded
and no check failed with ERROR severity; 1 when the run failed or such a check failed
(``matches_source`` is blocking), with the check's description; 2 when a wait timed out
(naming what it waited for).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

from cdc_lake.ops.instance import TRIGGER_TAG
from cdc_lake.source.captured import TABLES, CapturedTable
from cdc_lake.spark_apps.params import UpsertReport
from cdc_lake.stack.settings import StackSettings

# The figures printed per asset, by the start of their metadata key (units may follow).
HUDI_FIGURES = (
    "files_read",
    "events_read",
    "events_upserted",
    "records_",
    UpsertReport.COMMIT_INSTANT,
    "schema_version",
)
ITEMS_FIGURES = ("dagster/row_count", "total_revenue", "customers")
# A history table's (cdc_lake/defs/lake/history.py).
HISTORY_FIGURES = ("build", "versions_written", "current_versions")


def _described(metadata: dict[str, Any], wanted: tuple[str, ...]) -> str:
    """The asset's figures, or "nothing new" for a run that committed nothing (whose figures
    are the last commit's, carried forward: ``cdc_lake/defs/unchanged.py``)."""
    new = metadata.get(UpsertReport.NEW_COMMIT)
    unchanged = metadata.get("unchanged")
    if (new is not None and new.value is False) or (unchanged is not None and unchanged.value):
        commit = metadata.get(UpsertReport.COMMIT_INSTANT)
        return "nothing new" + (f" (still at commit {commit.value})" if commit else "")
    return _figures(metadata, wanted)


class RefreshTimeout(TimeoutError):
    pass


def wal_position(conn) -> str:
    with conn.cursor() as cur:
        cur.execute("SELECT pg_current_wal_lsn()::text")
        row = cur.fetchone()
    conn.commit()
    assert row is not None
    return row[0]


def wait_for_slot(conn, slot: str, lsn: str, timeout_s: float) -> str:
    """Wait until the slot's ``confirmed_flush_lsn`` is at or past ``lsn``; returns it."""
    deadline = time.monotonic() + timeout_s
    confirmed = None
    while True:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT confirmed_flush_lsn::text, confirmed_flush_lsn >= %s::pg_lsn"
                " FROM pg_replication_slots WHERE slot_name = %s",
                (lsn, slot),
            )
            row = cur.fetchone()
        conn.commit()
        if row is None:
            raise RefreshTimeout(
                f"replication slot {slot!r} does not exist: materialise the topic asset first"
            )
        confirmed, reached = row
        if reached:
            return confirmed
        if time.monotonic() > deadline:
            raise RefreshTimeout(
                f"Debezium has not acknowledged WAL position {lsn} after {timeout_s:.0f}s (slot "
                f"{slot!r} is at {confirmed}): is the source connector running?"
            )
        time.sleep(1.0)


def _figures(metadata: dict[str, Any], wanted: tuple[str, ...]) -> str:
    def norm(key: str) -> str:
        return re.sub(r"[^a-z0-9/]+", "_", key.lower())

    out = []
    for key, value in metadata.items():
        if any(norm(key).startswith(w) for w in wanted):
            shown = getattr(value, "value", value)
            if isinstance(shown, float):
                shown = f"{shown:,.2f}"
            elif isinstance(shown, int) and not isinstance(shown, bool):
                shown = f"{shown:,}"
            out.append(f"{key.removeprefix('dagster/')} {shown}")
    return ", ".join(out)


def run_refresh(
    settings: StackSettings, timeout_s: float = 300.0, tables: Sequence[CapturedTable] = TABLES
) -> int:
    import dagster as dg
    import psycopg2

    from cdc_lake.defs.keys import ORDER_ITEMS_KEY, table_keys
    from cdc_lake.ops.instance import configured_home, dagster_env
    from cdc_lake.resources.local import local_resources
    from cdc_lake.streaming.topics import wait_for_consumer

    t0 = time.monotonic()
    home = configured_home(settings)
    # The definitions' resources read the stack's settings and secrets from the environment.
    os.environ.update(dagster_env(settings, home))
    resources = local_resources(settings)
    cdc, kafka = resources["cdc"], resources["kafka"]
    conn = psycopg2.connect(settings.pg_dsn())
    try:
        mark = wal_position(conn)
        confirmed = wait_for_slot(conn, cdc.slot_name, mark, timeout_s)
    except RefreshTimeout as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        conn.close()
    print(f"[refresh] Debezium has published up to WAL {mark} (slot at {confirmed})", flush=True)
    for table in tables:
        topic = cdc.topic_of(table)
        try:
            ends = wait_for_consumer(kafka.client_conf(), cdc.sink_consumer_group, topic, timeout_s)
        except TimeoutError as e:
            print(f"error: the S3 sink has not flushed the topic: {e}", file=sys.stderr)
            return 2
        print(f"[refresh] the S3 sink has flushed {topic} up to offsets {ends}", flush=True)

    from cdc_lake.definitions import defs as load_defs

    definitions = load_defs() if callable(load_defs) else load_defs
    instance = dg.DagsterInstance.get()
    status = 0
    for table in tables:
        keys = table_keys(table)
        job = definitions.resolve_job_def(keys.refresh_job)
        shown = [(keys.hudi, HUDI_FIGURES), (ORDER_ITEMS_KEY, ITEMS_FIGURES)]
        if keys.history is not None:
            shown.insert(1, (keys.history, HISTORY_FIGURES))
        status = max(status, _run_job(job, instance, shown, f"{home}", t0))
    return status


def _lag_line(evaluations: list[Any]) -> str | None:
    """The lake's lag in seconds, from the run's ``lake_lag_seconds`` evaluation."""
    from cdc_lake.defs.lake.lag import LAG_CHECK

    lag = next((e for e in evaluations if e.check_name == LAG_CHECK), None)
    if lag is None:
        return None
    meta = {k: v.value for k, v in lag.metadata.items()}
    applied = meta.get("applied_lag_seconds")
    newest = "none applied yet" if applied is None else f"{float(applied):,.0f} s old"
    pending = float(meta.get("pending_lag_seconds", 0.0))
    return f"lag: oldest change not yet in the lake {pending:,.0f} s; newest applied {newest}"


def _run_job(
    job: Any, instance: Any, shown: list[tuple[Any, tuple[str, ...]]], home: str, t0: float
) -> int:
    """One refresh job in this process; 0, or 1 when it failed or a check failed with ERROR.
    ``shown``: the assets whose figures it prints, and which."""
    import dagster as dg

    from cdc_lake.ops.instance import check_evaluations, materializations

    started = time.monotonic()
    result = job.execute_in_process(
        instance=instance,
        tags={TRIGGER_TAG: "cdc-lake refresh"},
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        raise_on_error=False,
    )
    run_id = result.run_id
    mats = materializations(instance, run_id)
    for key, wanted in shown:
        if key in mats:
            print(f"[refresh] {key.to_user_string()}: {_described(mats[key].metadata, wanted)}")
    failed, passed = [], 0
    evaluations = check_evaluations(instance, run_id)
    for e in evaluations:
        passed += bool(e.passed)
        if not e.passed:
            where = f"{e.asset_key.to_user_string()}:{e.check_name}"
            print(f"[refresh]   check {where} FAILED ({e.severity.value}): {e.description or ''}")
            if e.severity == dg.AssetCheckSeverity.ERROR:
                failed.append(where)
    print(f"[refresh]   checks: {passed} of {len(evaluations)} passed")
    if (lag := _lag_line(evaluations)) is not None:
        print(f"[refresh]   {lag}")
    status = "succeeded" if result.success else "FAILED"
    # This run's own time; the command's total is since it started (t0).
    print(
        f"[refresh] {job.name} run {run_id} {status} in {time.monotonic() - started:.0f}s "
        f"({time.monotonic() - t0:.0f}s since the refresh began; instance {home})"
    )
    if not result.success or failed:
        why = f"checks failed: {', '.join(failed)}" if failed else "the run failed"
        failure = next(
            (e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE),
            None,
        )
        # The step's own error (a schema change the lake cannot take, bad input...), not just
        # "Execution of step ... failed".
        error = failure.step_failure_data.error if failure else None
        if error is not None and error.message:
            detail = f": {error.message.strip()}"
        else:
            detail = f": {failure.message}" if failure and failure.message else ""
        print(f"error: the lake refresh is not good: {why}{detail}", file=sys.stderr)
        return 1
    return 0
