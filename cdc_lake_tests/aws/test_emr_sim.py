"""The EMR simulator itself: what it cannot play fails, and it plays only what is submitted
while it runs."""

from __future__ import annotations

import time
from pathlib import Path

import boto3
import pytest

from cdc_lake.stack.settings import StackSettings
from cdc_lake_tests.aws.conftest import REGION
from cdc_lake_tests.aws.emr_sim import EmrSimulator

ROLE = "arn:aws:iam::123456789012:role/cdc-lake-emr"


def _after_scheduled(client, app: str, run: str, timeout_s: float = 30) -> dict:
    """The job run once it has left SCHEDULED (or as it is after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        detail = client.get_job_run(applicationId=app, jobRunId=run)["jobRun"]
        if detail["state"] != "SCHEDULED" or time.monotonic() > deadline:
            return detail
        time.sleep(0.2)


def test_a_job_run_it_cannot_play_fails_with_the_reason_and_is_not_played_again(
    moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    import moto.emrserverless.models as serverless_models

    monkeypatch.setattr(serverless_models, "JOB_STATUS", "SCHEDULED")
    keys = {"region_name": REGION, "endpoint_url": moto_endpoint,
            "aws_access_key_id": "x", "aws_secret_access_key": "x"}  # fmt: skip
    client = boto3.client("emr-serverless", **keys)
    s3 = boto3.client("s3", **keys)  # holds no bucket of the entry point's
    app = client.create_application(name="sim", releaseLabel="emr-7.5.0", type="SPARK")[
        "applicationId"
    ]
    driver = {"sparkSubmit": {"entryPoint": "s3://cdc-lake-sim-missing/entry.py"}}
    left = client.start_job_run(applicationId=app, executionRoleArn=ROLE, jobDriver=driver)
    settings = StackSettings(state_dir=tmp_path, jars_dir=tmp_path)

    with EmrSimulator(settings, s3, REGION) as sim:
        run = client.start_job_run(applicationId=app, executionRoleArn=ROLE, jobDriver=driver)
        detail = _after_scheduled(client, app, run["jobRunId"])
    # Failed, with the simulator's error, instead of scheduled for ever.
    assert detail["state"] == "FAILED"
    assert "HeadObject" in detail["stateDetails"]
    assert [e.returncode for e in sim.executions] == [-1]
    assert "cdc_lake_tests/aws/emr_sim.py" in sim.executions[0].stderr
    # The run submitted before the simulator started was not its to play.
    before = client.get_job_run(applicationId=app, jobRunId=left["jobRunId"])["jobRun"]
    assert before["state"] == "SCHEDULED"
