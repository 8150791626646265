"""The Spark launchers: the local stack's lake server, and on EMR a step on a running cluster and
an EMR Serverless job run.

The lake server runs the same refresh as Spark in the Dagster process, through a real
``dg.materialize``, on its one warm JVM; a failing app fails the step with its own error; a
server that is not there fails it with the fix.

On EMR, moto's server plays the EMR control planes and ``EmrSimulator`` runs what they were sent on
local Spark, from the code the resource uploaded, so the whole path is real but the cluster:
packaging, upload, the exact step, Pipes messages and logs through S3, polling to COMPLETED or
FAILED, and the failure as a Dagster error. The EMR Serverless job run takes its settings from
the production stack deployed to moto (``infra/test_moto_deploy.py``); its failure is here.
"""

from __future__ import annotations

from typing import Any

import boto3
import dagster as dg
import pytest
from botocore.stub import Stubber
from dagster_aws.pipes import PipesS3MessageReader
from dagster_pipes import decode_param

from bench.outbox import HUDI_KEY, cdc_events_hudi
from bench.synthetic import event
from cdc_lake.defs.keys import ORDER_ITEMS_KEY
from cdc_lake.defs.marts.assets import order_items
from cdc_lake.lake.hudi import SESSION_CONF
from cdc_lake.lake.readers import read_table
from cdc_lake.lake.schema import LakeSchema
from cdc_lake.resources.lake_server import LocalServerSparkLauncher
from cdc_lake.resources.spark import EmrStepLauncher, SparkLauncher
from cdc_lake.source.captured import OUTBOX
from cdc_lake.spark_apps.params import DiffParams, DiffReport
from cdc_lake.stack import LocalStack
from cdc_lake.stack.lake_server import token_path
from cdc_lake.stack.services import LakeServer
from cdc_lake_tests.aws.conftest import REGION, synthetic_lake, synthetic_resources
from cdc_lake_tests.aws.emr_sim import EmrSimulator

# What differs between two refreshes of the same data into two tables: when, and how long.
VARIES = ("commit_instant", "commit_time", "seconds", "last_full_scan_instant")
# Keys of the table state (live_key_digest) that name its commits.
STATE_INSTANTS = ("instant", "completed", "last_rescan")


def _same_across_tables(key: str, value: Any) -> Any:
    if key == "live_key_digest" and isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in STATE_INSTANTS}
    return value


def _metadata(result: dg.ExecuteInProcessResult, name: str) -> dict[str, Any]:
    """Every materialization's metadata and every check's outcome, with the lake's own name
    (in its paths and raw keys) replaced, and without the keys that must differ."""
    out: dict[str, Any] = {}
    for e in result.get_asset_materialization_events():
        m = e.materialization
        for k, v in m.metadata.items():
            if not k.endswith(VARIES):
                value = repr(_same_across_tables(k, v.value)).replace(name, "LAKE")
                out[f"{m.asset_key.to_user_string()} {k}"] = value
    for c in result.get_asset_check_evaluations():
        meta = {k: repr(v.value).replace(name, "LAKE") for k, v in c.metadata.items()
                if not k.endswith(VARIES)}  # fmt: skip
        out[f"check {c.check_name}"] = (c.passed, meta)
    return out


def _table(spark: Any, resources: dict[str, Any]) -> list[tuple]:
    rows = read_table(spark, resources["lake"].table_path_of(OUTBOX)).drop(
        "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name"
    )
    return sorted(tuple(r) for r in rows.collect())


def test_the_lake_server_refreshes_as_spark_in_process_does_on_one_warm_jvm(
    local_stack: LocalStack, secret_env, spark
):
    server = local_stack.service("lake_server")
    assert isinstance(server, LakeServer)
    before = server.health()
    batches = [
        [event(1, 100, 1), event(2, 100, 2), event(1, 200, 3, shipped_date=10010)],
        [event(3, 150, 4), event(2, 300, 5, op="d", deleted=True)],
    ]
    results, tables = {}, {}
    for mode in ("server", "in_process"):
        syn = synthetic_lake(local_stack)
        for partition, batch in enumerate(batches):
            syn.put(batch, partition=partition)
        resources = synthetic_resources(local_stack, syn, None, spark=mode)
        expected = LocalServerSparkLauncher if mode == "server" else SparkLauncher
        assert isinstance(resources["spark_jobs"], expected)
        result = dg.materialize([cdc_events_hudi, order_items], resources=resources)
        assert result.success
        results[mode], tables[mode] = _metadata(result, syn.name), _table(spark, resources)
        if mode == "server":
            # A second refresh, with new data, on the same server.
            syn.put([event(4, 400, 6), event(3, 410, 7, shipped_date=10020)], partition=1)
            again = dg.materialize([cdc_events_hudi, order_items], resources=resources)
            assert again.success
            table = read_table(spark, resources["lake"].table_path_of(OUTBOX))
            assert {r["order_id"] for r in table.select("order_id").collect()} == {1, 3, 4}
    assert len(results["server"]) > 20
    assert results["server"] == results["in_process"]
    assert tables["server"] and tables["server"] == tables["in_process"]
    # The four apps ran in the JVM that was up before them: no JVM started for a run.
    after = server.health()
    assert (after["pid"], after["jvm_pid"]) == (before["pid"], before["jvm_pid"])
    assert after["runs"] == before["runs"] + 4


def test_a_failing_app_fails_the_step_with_its_error(local_stack: LocalStack, secret_env):
    syn = synthetic_lake(local_stack)
    syn.put([event(1, 100, 1), "{this is not json"])
    resources = synthetic_resources(local_stack, syn, None, spark="server")
    result = dg.materialize([cdc_events_hudi], resources=resources, raise_on_error=False)
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data
    assert failure.error is not None
    message = failure.error.message
    assert "the upsert app failed on the lake server" in message
    assert "1 malformed line(s) in the raw files; nothing was committed" in message
    assert failure.user_failure_data is not None
    trace = failure.user_failure_data.metadata["traceback"].value
    assert "Traceback" in str(trace) and "run_upsert" in str(trace)
    # The server goes on serving.
    server = local_stack.service("lake_server")
    assert isinstance(server, LakeServer) and server.healthy()


def test_without_the_lake_server_the_step_says_to_start_the_stack(
    local_stack: LocalStack, secret_env
):
    s = local_stack.settings
    syn = synthetic_lake(local_stack)
    syn.put([event(1, 100, 1)])
    nowhere = LocalServerSparkLauncher(
        port=s.port("lake_server") + 1, token_file=str(token_path(s))
    )
    resources = synthetic_resources(local_stack, syn, nowhere)
    result = dg.materialize([cdc_events_hudi], resources=resources, raise_on_error=False)
    assert not result.success
    failure = result.get_step_failure_events()[0].step_failure_data
    assert failure.error is not None
    assert "the upsert app could not run" in failure.error.message
    assert "`cdc-lake stack up`" in failure.error.message


def _cluster(moto_endpoint: str, log_bucket: str) -> str:
    emr = boto3.client("emr", region_name=REGION, endpoint_url=moto_endpoint)
    return emr.run_job_flow(
        Name="cdc-lake-test",
        ReleaseLabel="emr-7.5.0",
        LogUri=f"s3://{log_bucket}/emr-logs/",
        Applications=[{"Name": "Spark"}, {"Name": "Hadoop"}],
        Instances={
            "MasterInstanceType": "m5.xlarge",
            "SlaveInstanceType": "m5.xlarge",
            "InstanceCount": 1,
            "KeepJobFlowAliveWhenNoSteps": True,
        },
        JobFlowRole="EMR_EC2_DefaultRole",
        ServiceRole="EMR_DefaultRole",
    )["JobFlowId"]


def _step_launcher(local_stack: LocalStack, moto_endpoint: str, cluster_id: str) -> EmrStepLauncher:
    s = local_stack.settings
    return EmrStepLauncher(
        region=REGION,
        cluster_id=cluster_id,
        code_bucket=s.lake_bucket,
        code_prefix="emr-test/code",
        pipes_bucket=s.lake_bucket,
        spark_conf={"spark.sql.shuffle.partitions": "4"},
        poll_interval_s=0.5,
        endpoint_url=moto_endpoint,
        s3_endpoint_url=s.s3_endpoint,
    )


def test_emr_step_runs_the_same_job_and_reports_through_pipes(
    local_stack: LocalStack, secret_env, spark, moto_endpoint: str
):
    s = local_stack.settings
    syn = synthetic_lake(local_stack)
    syn.put([event(1, 100, 1), event(2, 100, 2), event(1, 200, 3, shipped_date=10010)])
    syn.put([event(3, 150, 4), event(2, 300, 5, op="d", deleted=True)], partition=1)
    cluster_id = _cluster(moto_endpoint, s.lake_bucket)
    launcher = _step_launcher(local_stack, moto_endpoint, cluster_id)
    resources = synthetic_resources(local_stack, syn, launcher)
    s3 = local_stack.service("s3").client()  # type: ignore[attr-defined]

    instance = dg.DagsterInstance.ephemeral()
    with EmrSimulator(s, s3, REGION) as sim:
        result = dg.materialize(
            [cdc_events_hudi, order_items], resources=resources, instance=instance
        )
    assert result.success, [e.stderr[-3000:] for e in sim.executions]

    # Both apps ran as steps, from the uploaded code, with nothing of the project's checkout.
    assert [e.returncode for e in sim.executions] == [0, 0]
    emr = boto3.client("emr", region_name=REGION, endpoint_url=moto_endpoint)
    steps = emr.list_steps(ClusterId=cluster_id)["Steps"]
    assert len(steps) == 2 and {st["Status"]["State"] for st in steps} == {"COMPLETED"}
    step = emr.describe_step(ClusterId=cluster_id, StepId=steps[-1]["Id"])["Step"]  # the first
    assert step["ActionOnFailure"] == "CONTINUE"
    assert step["Config"]["Jar"] == "command-runner.jar"
    args = step["Config"]["Args"]
    listed = s3.list_objects_v2(Bucket=s.lake_bucket, Prefix="emr-test/code/")["Contents"]
    code = sorted(o["Key"] for o in listed)
    assert len(code) == 2
    assert code[0].endswith("/cdc_lake_job.zip") and code[1].endswith("/entry.py")
    confs = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--conf")
    assert args[:7] == [
        "spark-submit", "--deploy-mode", "cluster",
        "--jars", "/usr/lib/hudi/hudi-spark-bundle.jar",
        "--py-files", f"s3://{s.lake_bucket}/{code[0]}",
    ]  # fmt: skip
    assert confs == {**SESSION_CONF, "spark.sql.shuffle.partitions": "4"}
    entry_at = args.index(f"s3://{s.lake_bucket}/{code[1]}")
    assert args[entry_at + 1 :: 2] == ["--dagster-pipes-context", "--dagster-pipes-messages"]
    context = decode_param(args[entry_at + 2])["data"]  # inline, as PipesEnvContextInjector puts it
    assert context["extras"]["job"] == "upsert"
    assert context["extras"]["params"]["raw_prefix"] == syn.raw_prefix
    assert decode_param(args[entry_at + 4])["bucket"] == s.lake_bucket  # messages through S3

    # Metadata and the app's own check results came back through Pipes.
    mats = {m.asset_key: m for m in
            (e.materialization for e in result.get_asset_materialization_events())}  # fmt: skip
    meta: dict[str, Any] = {k: v.value for k, v in mats[HUDI_KEY].metadata.items()}
    assert (meta["records_inserted"], meta["events_read"], meta["files_read"]) == (2, 5, 2)
    assert meta["emr_cluster_id"] == cluster_id and meta["emr_step_state"] == "COMPLETED"
    assert meta["live_key_digest"]["rows"] == 2
    items_meta: dict[str, Any] = {k: v.value for k, v in mats[ORDER_ITEMS_KEY].metadata.items()}
    assert items_meta["dagster/row_count"] == 2 and "chart" in items_meta
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks == {"order_id_unique": True, "no_deleted_orders": True,
                      "incremental_matches_rescan": True, "revenue_non_negative": True,
                      "orders_exist_in_lake": True}  # fmt: skip

    table = read_table(spark, resources["lake"].table_path_of(OUTBOX))
    rows = {r["order_id"]: r for r in table.collect()}
    assert set(rows) == {1, 3} and rows[1]["shipped_date"].toordinal() > 0

    # An unchanged app package is not uploaded again: its keys carry its digest.
    uploads = _CountingUploads(s3)
    again_uris = resources["spark_jobs"].upload_app(uploads)
    assert again_uris == (f"s3://{s.lake_bucket}/{code[1]}", f"s3://{s.lake_bucket}/{code[0]}")
    assert uploads.count == 0
    # A run with no new files submits no step: it carries the last commit forward.
    with EmrSimulator(s, s3, REGION) as sim:
        again = dg.materialize([cdc_events_hudi], resources=resources, instance=instance)
    assert again.success and sim.executions == []
    assert len(emr.list_steps(ClusterId=cluster_id)["Steps"]) == 2
    mat = again.get_asset_materialization_events()[0].materialization
    assert mat.metadata["commit_instant"].value == meta["commit_instant"]
    assert mat.metadata["new_commit"].value is False and meta["new_commit"] is True

    # A check runs an app too (matches_source's diff): on EMR through its op's Pipes session,
    # reporting by message. Against no source rows, both lake rows are extra.
    s3.put_object(Bucket=s.lake_bucket, Key="emr-test/none.keys", Body=b"")
    diff = DiffParams(resources["lake"].table_path_of(OUTBOX),
                      LakeSchema.from_json(meta["lake_schema"]),
                      f"s3a://{s.lake_bucket}/emr-test/none.keys", 64, (1, 3))  # fmt: skip

    @dg.asset_check(asset=HUDI_KEY)
    def names_rows(context, spark_jobs: SparkLauncher) -> dg.AssetCheckResult:
        # (context unannotated: this module's annotations are strings, which Dagster refuses)
        found = spark_jobs.run(context, diff).metadata[DiffReport.DIFFERENCES].value
        return dg.AssetCheckResult(passed=True, metadata={"found": dg.MetadataValue.json(found)})

    with EmrSimulator(s, s3, REGION) as sim:
        checked = dg.materialize([cdc_events_hudi, names_rows], resources=resources,
                                 selection=dg.AssetSelection.checks(names_rows))  # fmt: skip
    assert checked.success and [e.returncode for e in sim.executions] == [0]
    (evaluation,) = checked.get_asset_check_evaluations()
    found = evaluation.metadata["found"].value
    assert found["counts"] == {"missing": 0, "extra": 2, "stale": 0}  # type: ignore[index]
    assert found["keys"] == {"extra": [["1"], ["3"]]}  # type: ignore[index]


class _CountingUploads:
    """An S3 client that counts ``upload_file`` calls."""

    def __init__(self, client: Any) -> None:
        self.client, self.count = client, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def upload_file(self, *args: Any, **kwargs: Any) -> Any:
        self.count += 1
        return self.client.upload_file(*args, **kwargs)


def test_a_failed_step_is_a_dagster_failure_with_reason_and_logs(
    local_stack: LocalStack, secret_env, moto_endpoint: str
):
    s = local_stack.settings
    syn = synthetic_lake(local_stack)
    syn.put([event(1, 100, 1), '{"order_id": "not a number", "__source_ts_ms": 1}'])
    cluster_id = _cluster(moto_endpoint, s.lake_bucket)
    launcher = _step_launcher(local_stack, moto_endpoint, cluster_id)
    resources = synthetic_resources(local_stack, syn, launcher)
    s3 = local_stack.service("s3").client()  # type: ignore[attr-defined]

    with EmrSimulator(s, s3, REGION) as sim:
        result = dg.materialize([cdc_events_hudi], resources=resources, raise_on_error=False)
    assert not result.success
    assert sim.executions[0].returncode != 0
    # The app's own error names the object and line (it reached Dagster through Pipes)...
    out = sim.executions[0].stdout + sim.executions[0].stderr
    assert "malformed line" in out and f"{syn.key(0, 0)} line 2" in out
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    text = str(failure.event_specific_data.error)  # type: ignore[union-attr]
    # ...and the step's failure names the step, its state, EMR's reason and where to look.
    assert "EMR step" in text and "FAILED" in text and "spark-submit exited with" in text
    assert f"clusterDetails/{cluster_id}" in str(failure.event_specific_data)
    # Nothing was committed.
    assert not any(
        o["Key"].endswith(".commit")
        for o in s3.list_objects_v2(Bucket=s.lake_bucket,
                                    Prefix=f"synthetic/{syn.name}/").get("Contents", [])
    )  # fmt: skip


def test_a_failed_emr_serverless_run_is_a_failure_with_its_details_and_logs():
    """Stubber: the polling of dagster-aws's client, then our failure with EMR's reason."""
    from cdc_lake.resources.spark import CdcEMRServerlessClient

    client = boto3.client("emr-serverless", region_name=REGION, aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
    ids = {"applicationId": "00fapp", "jobRunId": "00frun"}
    run = {
        **ids, "name": "cdc-lake-upsert",
        "arn": "arn:aws:emr-serverless:us-east-1:123456789012:/applications/00fapp/jobruns/00frun",
        "createdBy": "arn:aws:iam::123456789012:user/dagster", "createdAt": 0, "updatedAt": 0,
        "executionRole": "arn:aws:iam::123456789012:role/cdc-lake-emr", "stateDetails": "-",
        "releaseLabel": "emr-7.5.0", "jobDriver": {"sparkSubmit": {"entryPoint": "s3://b/e.py"}},
    }  # fmt: skip
    with Stubber(client) as stub:
        stub.add_response("get_job_run", {"jobRun": {**run, "state": "PENDING"}}, ids)
        failed = {**run, "state": "FAILED", "stateDetails": "Job failed: MalformedRawFileError"}
        stub.add_response("get_job_run", {"jobRun": failed}, ids)
        stub.add_response("get_dashboard_for_job_run", {"url": "https://dash/x"}, ids)
        stub.add_response("get_job_run", {"jobRun": failed}, ids)
        s3 = boto3.client("s3", region_name=REGION, aws_access_key_id="x",
                          aws_secret_access_key="x")  # fmt: skip
        pipes = CdcEMRServerlessClient(
            client=client,
            message_reader=PipesS3MessageReader(bucket="acme-cdc-lake", client=s3),
            poll_interval=0,
            log_uri="s3://acme-cdc-lake/emr-serverless-logs/",
        )
        with pytest.raises(dg.Failure) as info:
            pipes._wait_for_completion(dg.build_asset_context(), ids)
        stub.assert_no_pending_responses()
    text = str(info.value.description)
    assert "00frun FAILED" in text and "MalformedRawFileError" in text
    assert "s3://acme-cdc-lake/emr-serverless-logs/applications/00fapp/jobs/00frun/" in text
