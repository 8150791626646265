"""The EMR step Pipes client's polling, against EMR's service model (botocore's Stubber)."""

from __future__ import annotations

import boto3
import dagster as dg
import pytest
from botocore.stub import Stubber

from cdc_lake.aws.emr_step import EmrStepFailed, PipesEMRStepClient
from cdc_lake_tests.aws.conftest import REGION


def test_step_polling_to_failed_with_emr_failure_details():
    """Stubber: every request is checked against EMR's service model."""
    emr = boto3.client("emr", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    client = PipesEMRStepClient(emr, message_reader=None, region=REGION, poll_interval_s=0)  # type: ignore[arg-type]
    ids = {"ClusterId": "j-ABC", "StepId": "s-1"}
    with Stubber(emr) as stub:
        for state in ("PENDING", "RUNNING"):
            stub.add_response("describe_step",
                              {"Step": {"Id": "s-1", "Name": "cdc-lake upsert",
                                        "Status": {"State": state}}}, ids)  # fmt: skip
        stub.add_response(
            "describe_step",
            {"Step": {"Id": "s-1", "Name": "cdc-lake upsert", "Status": {
                "State": "FAILED",
                "FailureDetails": {
                    "Reason": "Unknown Error.",
                    "Message": "Exception in thread main: MalformedRawFileError",
                    "LogFile": "s3://logs/emr-logs/j-ABC/steps/s-1/stderr.gz",
                }}}},
            ids,
        )  # fmt: skip
        with pytest.raises(EmrStepFailed) as info:
            client.wait_for_step(dg.build_asset_context(), "j-ABC", "s-1")
        stub.assert_no_pending_responses()
    text = str(info.value.description)
    assert "s-1" in text and "FAILED" in text and "MalformedRawFileError" in text
    assert "s3://logs/emr-logs/j-ABC/steps/s-1/stderr.gz" in text
    assert info.value.metadata["log_file"].value == "s3://logs/emr-logs/j-ABC/steps/s-1/stderr.gz"
