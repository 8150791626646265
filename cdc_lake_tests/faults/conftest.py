"""Fixtures of the fault-injection suite, and its summary table.

Each fault test gets a pipeline of its own (``make_pipeline``) on the session's real stack, and a
``fault_record`` it fills with its figures. Records are kept on the pytest config, and
``pytest_terminal_summary`` prints them as one table at the end of the run, failed faults
included (a test that stopped before its comparison shows up as "error").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cdc_lake.stack import LocalStack
from cdc_lake_tests.faults.harness import FaultPipeline, FaultRecord

RESULTS = pytest.StashKey[list[FaultRecord]]()
COLUMNS = ("fault", "survived", "lost", "duplicated", "extra", "stale", "changes", "events",
           "seconds")  # fmt: skip


@pytest.fixture
def make_pipeline(
    local_stack: LocalStack, secret_env: dict[str, str], spark: Any
) -> Iterator[Callable[..., FaultPipeline]]:
    """``make_pipeline(name, **options)``: a fault's own pipeline, torn down after the test
    (servers up again, connectors deleted, slot and database dropped)."""
    made: list[FaultPipeline] = []

    def make(name: str, **options: Any) -> FaultPipeline:
        pipeline = FaultPipeline(local_stack, name, **options)
        made.append(pipeline)
        return pipeline

    yield make
    for pipeline in made:
        pipeline.close()


@pytest.fixture
def fault_record(request: pytest.FixtureRequest) -> Iterator[FaultRecord]:
    record = FaultRecord(fault=request.node.name)
    yield record
    if record.survived is None:
        record.note = record.note or "stopped before the comparison (see the test's error)"
    if not record.seconds:
        record.seconds = round(time.monotonic() - record.started, 1)
    request.config.stash.setdefault(RESULTS, []).append(record)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    records = config.stash.get(RESULTS, [])
    if not records:
        return
    rows = [COLUMNS] + [
        tuple(
            _cell("error" if r.survived is None and c == "survived" else getattr(r, c))
            for c in COLUMNS
        )
        for r in records
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    tr = terminalreporter
    tr.write_sep("=", "faults: Hudi lake vs datalake.cdc_events, row for row")
    for n, row in enumerate(rows):
        tr.write_line(" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if n == 0:
            tr.write_line("-+-".join("-" * w for w in widths))
    tr.write_line(
        f"total {sum(r.seconds for r in records):.1f}s; lost: live source orders missing from "
        "the lake; duplicated: order_ids on more than one lake row; extra: lake orders deleted "
        "in the source; stale: content differs"
    )
    for r in records:
        if r.note:
            tr.write_line(f"  {r.fault}: {r.note}")
