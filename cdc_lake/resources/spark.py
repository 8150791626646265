"""The Spark launchers: where the lake's Spark apps run. One interface, five implementations.

``SparkLauncher.run(context, params)`` runs the app its parameters name (``UpsertParams`` or
``OrderItemsParams``, ``cdc_lake/spark_apps/params.py``; JSON on the way) with
``cdc_lake.spark_apps.run.run_app`` and returns its metadata and check results as Dagster
objects (a "job" is a Dagster job; what runs on Spark is an app):

- ``LocalServerSparkLauncher`` (``cdc_lake/resources/lake_server.py``, with the local set, so
  that the production set never loads the local stack): on the local stack's lake server, a
  long-lived process whose Spark session is already warm, one app at a time. The local default
  (``CDC_LAKE_LOCAL_SPARK``, see ``cdc_lake/resources/local.py``).
- ``LocalSparkLauncher``: in the Dagster process, on the PySpark resource's session (local
  Spark with the Hudi bundle), which starts its JVM in every run process that needs it.
- ``SparkClusterLauncher`` (``cdc_lake/resources/spark_cluster.py``, local set): as an
  application on the local stack's Spark standalone cluster, packaged and started as an EMR
  step is (``CDC_LAKE_LOCAL_SPARK=cluster``).
- ``EmrStepLauncher``: as a step on a running EMR cluster, through ``PipesEMRStepClient``.
- ``EmrServerlessLauncher``: as an EMR Serverless job run, through dagster-aws's
  ``PipesEMRServerlessClient``.

The EMR variants package the apps (``cdc_lake/spark_apps/package.py``), upload them to S3 by
content hash, and run ``cdc_lake/spark_apps/entry.py`` with them. Hudi and Spark come from the
EMR release: the only jar named is the image's own Hudi bundle. A failed step or job run raises
``dg.Failure`` with EMR's reason and where its logs are.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import dagster as dg
from dagster._core.pipes.client import PipesClientCompletedInvocation
from dagster_aws.pipes import PipesEMRServerlessClient, PipesS3MessageReader
from dagster_aws.s3 import S3Resource
from dagster_pyspark import LazyPySparkResource

from cdc_lake.aws.emr_step import PipesEMRStepClient
from cdc_lake.lake.hudi import SESSION_CONF
from cdc_lake.spark_apps.entry import APP_EXTRA, PARAMS_EXTRA
from cdc_lake.spark_apps.package import build_package, upload_package
from cdc_lake.spark_apps.params import AppParams

# The Hudi bundle of the EMR release (EMR 7.x: Spark 3.5), on every node of the image.
EMR_HUDI_JARS = ("/usr/lib/hudi/hudi-spark-bundle.jar",)

_METADATA_TYPES = {
    "int": dg.MetadataValue.int,
    "float": dg.MetadataValue.float,
    "text": dg.MetadataValue.text,
    "json": dg.MetadataValue.json,
    "md": dg.MetadataValue.md,
    "path": dg.MetadataValue.path,
    "url": dg.MetadataValue.url,
    "bool": dg.MetadataValue.bool,
}


@dataclass
class SparkOutcome:
    metadata: dict[str, Any] = field(default_factory=dict)
    checks: list[dg.AssetCheckResult] = field(default_factory=list)

    def materialize_result(
        self,
        context: dg.AssetExecutionContext,
        data_version: dg.DataVersion | None = None,
        lead: dict[str, Any] | None = None,
        **extra: Any,
    ) -> dg.MaterializeResult:
        """The result, with the check results of the checks selected in this run only. The UI
        lists metadata in order: ``lead`` first, then the app's, then ``extra``."""
        selected = {key.name for key in context.selected_asset_check_keys}
        return dg.MaterializeResult(
            metadata={**(lead or {}), **self.metadata, **extra},
            check_results=[c for c in self.checks if c.check_name in selected],
            data_version=data_version,
        )


def to_metadata(raw: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Pipes wire metadata (``{"raw_value", "type"}``) to Dagster metadata values."""
    return {k: _METADATA_TYPES[v["type"]](v["raw_value"]) for k, v in raw.items()}


def outcome_from_report(report: Any) -> SparkOutcome:
    checks = [
        dg.AssetCheckResult(
            check_name=c["check_name"],
            passed=c["passed"],
            severity=dg.AssetCheckSeverity(c["severity"]),
            metadata=to_metadata(c["metadata"]),
        )
        for c in report.checks
    ]
    return SparkOutcome(to_metadata(report.metadata), checks)


def outcome_from_pipes(invocation: PipesClientCompletedInvocation) -> SparkOutcome:
    outcome = SparkOutcome()
    for message in invocation.get_custom_messages():  # an app a check runs (DiffParams)
        if isinstance(message, dict) and isinstance(message.get("metadata"), dict):
            outcome.metadata |= to_metadata(message["metadata"])
    for result in invocation.get_results():
        if isinstance(result, dg.MaterializeResult):
            outcome.metadata |= dict(result.metadata or {})
        elif isinstance(result, dg.AssetCheckResult):
            outcome.checks.append(result)
    if not outcome.metadata:  # the metadata of a message or a materialization, never none
        raise dg.Failure(
            "the Spark app finished but reported no materialization through Pipes: check that "
            "the app's S3 messages reached the Pipes bucket"
        )
    outcome.metadata |= dict(invocation.metadata)
    return outcome


def spark_submit_args(
    py_files: str, conf: dict[str, str], jars: tuple[str, ...] = EMR_HUDI_JARS
) -> list[str]:
    """spark-submit options shared by EMR steps and EMR Serverless: the lake's session settings,
    the image's Hudi bundle, the apps' zip, then the deployment's own confs (which win)."""
    args = ["--jars", ",".join(jars), "--py-files", py_files]
    for key, value in {**SESSION_CONF, **conf}.items():
        args += ["--conf", f"{key}={value}"]
    return args


# What runs an app: an asset (upsert, order items) or a check (diff).
AppContext = dg.AssetExecutionContext | dg.AssetCheckExecutionContext


def op_context(context: AppContext) -> dg.OpExecutionContext | dg.AssetExecutionContext:
    """The context Pipes takes (a check's is its op's)."""
    if isinstance(context, dg.AssetCheckExecutionContext):
        return context.op_execution_context
    return context


class SparkLauncher(dg.ConfigurableResource):
    """Runs a lake Spark app (``upsert``, ``order_items`` or ``diff``) somewhere, returning its
    outcome."""

    def run(self, context: AppContext, params: AppParams) -> SparkOutcome:
        raise NotImplementedError


class LocalSparkLauncher(SparkLauncher):
    """The app in this process, on the PySpark resource's local Spark session. It is lazy: the
    session starts with the first app, so a run that needs none starts no JVM."""

    pyspark: LazyPySparkResource
    s3: S3Resource

    def run(self, context: AppContext, params: AppParams) -> SparkOutcome:
        from cdc_lake.spark_apps.run import run_app

        client = self.s3.get_client()
        report = run_app(self.pyspark.spark_session, client, params.APP, params.to_json())
        return outcome_from_report(report)


class _EmrLauncher(SparkLauncher):
    region: str
    code_bucket: str
    code_prefix: str = "cdc-lake/code"
    pipes_bucket: str
    spark_conf: dict[str, str] = {}
    poll_interval_s: float = 15.0
    # Only for tests (moto's server for EMR, the local S3 server); on AWS, the region decides.
    endpoint_url: str | None = None
    s3_endpoint_url: str | None = None

    def client(self, service: str) -> Any:
        endpoint = self.s3_endpoint_url if service == "s3" else self.endpoint_url
        return boto3.client(service, region_name=self.region, endpoint_url=endpoint)

    def upload_app(self, s3: Any) -> tuple[str, str]:
        with tempfile.TemporaryDirectory(prefix="cdc-lake-job-") as tmp:
            package = build_package(Path(tmp))
            return upload_package(s3, package, self.code_bucket, self.code_prefix)

    def message_reader(self, s3: Any) -> PipesS3MessageReader:
        return PipesS3MessageReader(
            bucket=self.pipes_bucket, client=s3, interval=self.poll_interval_s
        )


class EmrStepLauncher(_EmrLauncher):
    """The app as a step on a running EMR cluster (``add_job_flow_steps``), as the reference
    design's ``aws emr add-steps``."""

    cluster_id: str
    deploy_mode: str = "cluster"

    def run(self, context: AppContext, params: AppParams) -> SparkOutcome:
        s3 = self.client("s3")
        entry_uri, zip_uri = self.upload_app(s3)
        pipes_context = op_context(context)
        client = PipesEMRStepClient(
            self.client("emr"), self.message_reader(s3), self.region, self.poll_interval_s
        )
        invocation = client.run(
            context=pipes_context,
            cluster_id=self.cluster_id,
            step_name=f"cdc-lake {params.APP} (dagster run {pipes_context.run.run_id[:8]})",
            entry_point=entry_uri,
            spark_submit_args=[
                "--deploy-mode",
                self.deploy_mode,
                *spark_submit_args(zip_uri, self.spark_conf),
            ],
            extras={APP_EXTRA: params.APP, PARAMS_EXTRA: params.to_json()},
        )
        return outcome_from_pipes(invocation)


class CdcEMRServerlessClient(PipesEMRServerlessClient):
    """dagster-aws's client, with a failure that carries EMR's reason and the logs' location."""

    def __init__(self, *args: Any, log_uri: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.log_uri = log_uri

    def _wait_for_completion(self, context: Any, start_response: Any) -> Any:
        try:
            return super()._wait_for_completion(context, start_response)
        except RuntimeError as e:
            run = self.client.get_job_run(
                applicationId=start_response["applicationId"], jobRunId=start_response["jobRunId"]
            )["jobRun"]
            logs = (
                f"{self.log_uri.rstrip('/')}/applications/{run['applicationId']}/jobs/"
                f"{run['jobRunId']}/"
                if self.log_uri
                else "CloudWatch / the EMR Studio dashboard of the application"
            )
            raise dg.Failure(
                description=f"EMR Serverless job run {run['jobRunId']} {run['state']}: "
                f"{run.get('stateDetails') or 'no details given'}. Logs: {logs}",
                metadata={"state": run["state"], "logs": dg.MetadataValue.path(logs)},
            ) from e


class EmrServerlessLauncher(_EmrLauncher):
    """The app as an EMR Serverless job run (``start_job_run``) on a Spark application."""

    application_id: str
    execution_role_arn: str
    log_uri: str | None = None  # s3://... for the driver's and executors' logs

    def start_params(self, app: str, entry_uri: str, zip_uri: str) -> dict[str, Any]:
        params: dict[str, Any] = {
            "applicationId": self.application_id,
            "executionRoleArn": self.execution_role_arn,
            "name": f"cdc-lake-{app}",
            "jobDriver": {
                "sparkSubmit": {
                    "entryPoint": entry_uri,
                    "sparkSubmitParameters": " ".join(spark_submit_args(zip_uri, self.spark_conf)),
                }
            },
        }
        if self.log_uri:
            params["configurationOverrides"] = {
                "monitoringConfiguration": {"s3MonitoringConfiguration": {"logUri": self.log_uri}}
            }
        return params

    def run(self, context: AppContext, params: AppParams) -> SparkOutcome:
        s3 = self.client("s3")
        entry_uri, zip_uri = self.upload_app(s3)
        pipes_context = op_context(context)
        client = CdcEMRServerlessClient(
            client=self.client("emr-serverless"),
            message_reader=self.message_reader(s3),
            poll_interval=self.poll_interval_s,
            log_uri=self.log_uri,
        )
        invocation = client.run(
            context=pipes_context,
            start_job_run_params=self.start_params(params.APP, entry_uri, zip_uri),  # type: ignore[arg-type]
            extras={APP_EXTRA: params.APP, PARAMS_EXTRA: params.to_json()},
        )
        return outcome_from_pipes(invocation)
