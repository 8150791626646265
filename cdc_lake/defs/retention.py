"""``dagster_runs_prune``: forget the finished runs older than ``keep_days``, keeping the newest
``keep_newest`` and every run that holds an asset's latest materialization or a check's latest
evaluation (the rules: ``cdc_lake/runs/retention.py``). Its schedule runs it daily once turned on
in the UI (Automation); a run of the job from the Launchpad prunes now.

The sensor's ticks have their own retention, in the instance's ``dagster.yaml``
(``cdc_lake/ops/instance.py`` writes it for the stack's instance)."""

import datetime as dt

import dagster as dg
from dagster_shared.check import CheckError

from cdc_lake.runs.retention import prune_runs


class RunRetentionConfig(dg.Config):
    keep_days: float = 7.0  # finished runs younger than this are kept
    keep_newest: int = 1_000  # and so are this many of the newest runs, however old


@dg.op(description="Delete the finished runs the retention rules allow, with their event logs.")
def prune_finished_runs(context: dg.OpExecutionContext, config: RunRetentionConfig) -> int:
    before = dt.datetime.now(dt.UTC) - dt.timedelta(days=config.keep_days)
    try:  # a run launched from the code location has its repository; an in-process one not
        checks = list(context.repository_def.asset_graph.asset_check_keys)
    except CheckError:
        checks = []
    pruned = prune_runs(context.instance, before, config.keep_newest, checks)
    context.log.info(
        f"pruned {len(pruned)} finished runs created before {before:%Y-%m-%d %H:%M} UTC "
        f"(kept the newest {config.keep_newest}, and those holding the latest materialization of "
        f"an asset or the latest evaluation of one of {len(checks)} checks)"
    )
    return len(pruned)


@dg.job(
    name="dagster_runs_prune",
    description="Delete finished runs older than keep_days (config), with their event logs; "
    "never the newest keep_newest, nor a run holding an asset's latest materialization or a "
    "check's latest evaluation.",
)
def dagster_runs_prune_job() -> None:
    prune_finished_runs()


# Off by default: turn it on in the UI (Automation) to prune daily.
dagster_runs_prune_schedule = dg.ScheduleDefinition(
    job=dagster_runs_prune_job,
    cron_schedule="30 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
)
