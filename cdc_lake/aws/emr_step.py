"""A Dagster Pipes client that runs a Spark app as a step on an existing EMR cluster.

Why not dagster-aws's ``PipesEMRClient``: it calls ``run_job_flow``, so every run starts (and
waits for) a new cluster. The reference design submits ``aws emr add-steps`` to a long-running
cluster instead, which saves the cluster's start-up time per run. This client does that with
boto3's ``add_job_flow_steps`` and keeps the rest of Pipes as dagster-aws does it:

- **Context and message parameters** travel as CLI arguments (``--dagster-pipes-context`` and
  ``--dagster-pipes-messages``) after the entry point, because a step has no environment of its
  own. The context is small and inline; the messages go through S3 (``PipesS3MessageReader``).
- **Logs.** With the cluster's ``LogUri`` set, the step's stdout and stderr (gzipped in S3) are
  forwarded to the Dagster run's logs.
- **Completion.** ``describe_step`` is polled until the step is COMPLETED. FAILED, CANCELLED and
  INTERRUPTED raise ``EmrStepFailed``, which names the step, the reason EMR gives, its log file
  and a link to the cluster in the console.
- **Interruption.** If the Dagster run is terminated, the step is cancelled (``cancel_steps``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import dagster as dg
from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._core.pipes.client import PipesClientCompletedInvocation, PipesMessageReader
from dagster._core.pipes.utils import PipesEnvContextInjector, open_pipes_session
from dagster_aws.pipes import PipesS3LogReader, PipesS3MessageReader
from dagster_aws.pipes.message_readers import gzip_log_decode_fn

ACTIVE_CLUSTER_STATES = ("STARTING", "BOOTSTRAPPING", "RUNNING", "WAITING")
FAILED_STEP_STATES = ("FAILED", "CANCELLED", "INTERRUPTED")


class EmrStepFailed(dg.Failure):
    """The EMR step ended in FAILED, CANCELLED or INTERRUPTED."""


def console_url(region: str, cluster_id: str) -> str:
    return (
        f"https://{region}.console.aws.amazon.com/emr/home?region={region}"
        f"#/clusterDetails/{cluster_id}"
    )


def step_command(
    entry_point: str, spark_submit_args: Sequence[str], pipes_cli: dict[str, str]
) -> list[str]:
    """``spark-submit <args> <entry point> --dagster-pipes-context X --dagster-pipes-messages Y``"""
    tail = [part for item in sorted(pipes_cli.items()) for part in item]
    return ["spark-submit", *spark_submit_args, entry_point, *tail]


class PipesEMRStepClient(dg.PipesClient):
    """Submit one Spark step to a running EMR cluster and follow it through Dagster Pipes."""

    def __init__(
        self,
        emr_client: Any,
        message_reader: PipesMessageReader,
        region: str,
        poll_interval_s: float = 10.0,
        forward_termination: bool = True,
    ):
        self.emr = emr_client
        self.message_reader = message_reader
        self.region = region
        self.poll_interval_s = poll_interval_s
        self.forward_termination = forward_termination

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        return False

    def run(  # pyright: ignore[reportIncompatibleMethodOverride]
        self,
        *,
        context: dg.AssetExecutionContext | dg.OpExecutionContext,
        cluster_id: str,
        step_name: str,
        entry_point: str,
        spark_submit_args: Sequence[str],
        extras: dict[str, Any] | None = None,
    ) -> PipesClientCompletedInvocation:
        cluster = self.emr.describe_cluster(ClusterId=cluster_id)["Cluster"]
        state = cluster["Status"]["State"]
        if state not in ACTIVE_CLUSTER_STATES:
            raise dg.Failure(
                description=f"EMR cluster {cluster_id} is {state}, so it cannot take steps. Fix: "
                "start a cluster and set CDC_LAKE_EMR_CLUSTER_ID to its id.",
                metadata={"cluster": dg.MetadataValue.url(console_url(self.region, cluster_id))},
            )
        with open_pipes_session(
            context=context,
            message_reader=self.message_reader,
            context_injector=PipesEnvContextInjector(),
            extras=extras,
        ) as session:
            args = step_command(
                entry_point, spark_submit_args, dict(session.get_bootstrap_cli_arguments())
            )
            step_id = self.emr.add_job_flow_steps(
                JobFlowId=cluster_id,
                Steps=[
                    {
                        "Name": step_name,
                        # One failed run must not take the shared cluster down.
                        "ActionOnFailure": "CONTINUE",
                        "HadoopJarStep": {"Jar": "command-runner.jar", "Args": args},
                    }
                ],
            )["StepIds"][0]
            session.report_launched({"extras": {"cluster_id": cluster_id, "step_id": step_id}})
            context.log.info(f"[pipes] EMR step {step_id} submitted to cluster {cluster_id}")
            self._forward_step_logs(cluster, step_id)
            try:
                step = self.wait_for_step(context, cluster_id, step_id)
            except DagsterExecutionInterruptedError:
                if self.forward_termination:
                    context.log.warning(f"[pipes] run interrupted: cancelling EMR step {step_id}")
                    self.emr.cancel_steps(ClusterId=cluster_id, StepIds=[step_id])
                raise
            return PipesClientCompletedInvocation(
                session,
                metadata={
                    "emr_cluster_id": cluster_id,
                    "emr_step_id": step_id,
                    "emr_step_state": step["Status"]["State"],
                    "emr_console": dg.MetadataValue.url(console_url(self.region, cluster_id)),
                },
            )

    def wait_for_step(
        self, context: dg.AssetExecutionContext | dg.OpExecutionContext, cluster_id: str,
        step_id: str,
    ) -> dict[str, Any]:  # fmt: skip
        last = None
        while True:
            step = self.emr.describe_step(ClusterId=cluster_id, StepId=step_id)["Step"]
            state = step["Status"]["State"]
            if state != last:
                context.log.info(f"[pipes] EMR step {step_id}: {state}")
                last = state
            if state == "COMPLETED":
                return step
            if state in FAILED_STEP_STATES:
                raise self.failure(cluster_id, step)
            time.sleep(self.poll_interval_s)

    def failure(self, cluster_id: str, step: dict[str, Any]) -> EmrStepFailed:
        status = step["Status"]
        details = status.get("FailureDetails", {})
        reason = details.get("Reason") or status.get("StateChangeReason", {}).get("Message")
        log_file = details.get("LogFile")
        message = details.get("Message")
        text = f"EMR step {step['Id']} ({step.get('Name', '')}) {status['State']}"
        if reason:
            text += f": {reason}"
        if message:
            text += f" ({message})"
        if log_file:
            text += f". Logs: {log_file}"
        meta: dict[str, Any] = {
            "cluster": dg.MetadataValue.url(console_url(self.region, cluster_id)),
            "state": status["State"],
        }
        if log_file:
            meta["log_file"] = dg.MetadataValue.path(log_file)
        return EmrStepFailed(description=text, metadata=meta)

    def _forward_step_logs(self, cluster: dict[str, Any], step_id: str) -> None:
        log_uri = cluster.get("LogUri")
        if not isinstance(self.message_reader, PipesS3MessageReader) or not log_uri:
            return
        bucket, _, prefix = log_uri.removeprefix("s3://").removeprefix("s3n://").partition("/")
        for stdio in ("stdout", "stderr"):
            key = f"{prefix.rstrip('/')}/{cluster['Id']}/steps/{step_id}/{stdio}.gz".lstrip("/")
            self.message_reader.add_log_reader(
                PipesS3LogReader(
                    client=self.message_reader.client,
                    bucket=bucket,
                    key=key,
                    decode_fn=gzip_log_decode_fn,
                    target_stream=sys.stdout if stdio == "stdout" else sys.stderr,
                    debug_info=f"{stdio} of EMR step {step_id}",
                )
            )
