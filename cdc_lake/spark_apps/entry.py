"""Entry point of the lake's Spark apps on EMR (a cluster step or an EMR Serverless job run), and
on the local Spark standalone cluster.

``spark-submit --py-files cdc_lake_job.zip entry.py [--dagster-pipes-context ...]``

It opens Dagster Pipes, reads ``{"job": ..., "params": ...}`` from the Pipes extras (``job``
names the app: the extras' key is the wire format the launchers write), runs the same function
the local path runs (``cdc_lake.spark_apps.run.run_app``), and reports the
materialisation and the check results back through S3 (a file on the local cluster). Pipes
parameters come from the CLI arguments (cluster steps) or the environment (EMR Serverless driver
env, the local cluster). An exception fails the step or job run; Pipes reports it to Dagster
with its traceback. Nothing is committed to the Hudi table unless the whole batch is valid (see
``cdc_lake/lake/ingest.py``).
"""

from __future__ import annotations

import sys

# The Pipes extras that name the app and hold its parameters: the launchers write them, main
# reads them. "job" is the wire name from before apps were called apps.
APP_EXTRA, PARAMS_EXTRA = "job", "params"


def main(argv: list[str] | None = None) -> None:
    import boto3
    from dagster_pipes import (
        DAGSTER_PIPES_CONTEXT_CLI_ARGUMENT,
        PipesCliArgsParamsLoader,
        PipesDefaultMessageWriter,
        PipesEnvVarParamsLoader,
        PipesS3MessageWriter,
        open_dagster_pipes,
    )
    from pyspark.sql import SparkSession

    from cdc_lake.spark_apps.params import APPS
    from cdc_lake.spark_apps.run import run_app

    argv = sys.argv if argv is None else argv
    cli = DAGSTER_PIPES_CONTEXT_CLI_ARGUMENT in argv
    loader = PipesCliArgsParamsLoader() if cli else PipesEnvVarParamsLoader()
    s3 = boto3.client("s3")  # the instance role on EMR; AWS_ENDPOINT_URL_S3 elsewhere
    # Messages go where the launcher reads them: S3 from EMR; a file beside a driver that runs
    # on the Dagster host (the local standalone cluster, whose driver is in client mode).
    writer = (
        PipesS3MessageWriter(client=s3, interval=2)
        if "bucket" in loader.load_messages_params()
        else PipesDefaultMessageWriter()
    )
    with open_dagster_pipes(params_loader=loader, message_writer=writer) as pipes:
        app, params = pipes.extras[APP_EXTRA], pipes.extras[PARAMS_EXTRA]
        pipes.log.info(f"cdc-lake {app} app starting")
        spark = SparkSession.Builder().appName(f"cdc-lake-{app}").getOrCreate()
        report = run_app(spark, s3, app, params)
        if APPS[app].REPORTS_MATERIALIZATION:
            pipes.report_asset_materialization(metadata=report.metadata)
        else:  # an app a check runs: its metadata as a message (the check has no asset)
            pipes.report_custom_message({"metadata": report.metadata})
        for check in report.checks:
            pipes.report_asset_check(**check)
        pipes.log.info(f"cdc-lake {app} app done")


if __name__ == "__main__":
    main()
