"""A connector's health from Kafka Connect's status document: RUNNING passes, FAILED is an error
that quotes its trace, anything else not running is a warning, and a missing connector an
error."""

from __future__ import annotations

from cdc_lake.streaming.connector_health import (
    connector_health,
    failed_components,
    failure_trace,
)


def _status(connector: str, *tasks: str, trace: str | None = None) -> dict:
    return {
        "connector": {"state": connector},
        "tasks": [
            {"id": i, "state": s, **({"trace": trace} if s == "FAILED" and trace else {})}
            for i, s in enumerate(tasks)
        ],
    }


def test_running_connector_and_tasks_pass():
    health = connector_health("sink", _status("RUNNING", "RUNNING", "RUNNING"))
    assert health.passed and health.severity is None
    assert health.states == {"connector": "RUNNING", "task 0": "RUNNING", "task 1": "RUNNING"}


def test_failed_task_is_an_error_quoting_the_first_line_of_its_trace():
    trace = "org.apache.kafka.connect.errors.ConnectException: NoSuchBucket cdc-raw\n\tat x.y(Z)"
    health = connector_health("sink", _status("RUNNING", "RUNNING", "FAILED", trace=trace))
    assert not health.passed and health.severity == "ERROR"
    assert "task 1 FAILED" in health.description
    assert "NoSuchBucket cdc-raw" in health.description and "x.y(Z)" not in health.description


def test_paused_or_unassigned_is_a_warning():
    paused = connector_health("src", _status("PAUSED", "PAUSED"))
    assert not paused.passed and paused.severity == "WARN"
    assert paused.description == "src: connector PAUSED, task 0 PAUSED"
    unassigned = connector_health("src", _status("RUNNING", "UNASSIGNED"))
    assert unassigned.severity == "WARN" and "task 0 UNASSIGNED" in unassigned.description


def test_failed_connector_without_trace_and_missing_connector_are_errors():
    failed = connector_health("src", _status("FAILED"))
    assert failed.severity == "ERROR" and "no trace reported" in failed.description
    missing = connector_health("src", None)
    assert not missing.passed and missing.severity == "ERROR"
    assert "does not exist" in missing.description


def test_msk_connect_status_has_no_tasks():
    # MSK Connect reports the connector's state only; it stands for its tasks.
    assert connector_health("src", {"connector": {"state": "RUNNING"}, "tasks": []}).passed
    updating = connector_health("src", {"connector": {"state": "UPDATING"}, "tasks": []})
    assert updating.severity == "WARN"


def test_failed_components_and_trace_name_each_failed_part():
    trace = "org.apache.kafka.connect.errors.ConnectException: bucket gone\n\tat x.y(Z.java:1)"
    status = _status("RUNNING", "FAILED", "RUNNING", trace=trace)
    assert failed_components(status) == [
        "task 0: org.apache.kafka.connect.errors.ConnectException: bucket gone"
    ]
    assert failed_components(_status("RUNNING", "RUNNING")) == []
    assert failed_components(None) == []
    where = failure_trace(status)
    assert where is not None and where.startswith("task 0 on ") and "\tat x.y" in where
    assert failure_trace(_status("RUNNING", "RUNNING")) is None
