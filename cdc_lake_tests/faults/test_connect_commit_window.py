"""Fault 1 (project issue 9): Connect killed between a raw object's upload and its offset commit.

The S3 sink uploads a raw object; the worker commits the sink's consumer offsets only every
``offset.flush.interval.ms`` (5 s), and ``kill -9`` lands in that window. A lake refresh runs
while Connect is down and ingests the object. Connect comes back, the sink redelivers from the
committed offset while Debezium publishes the changes made meanwhile, and it cuts the batch again
under the same key (the same start offset), now with more records.

Proves: the lake still equals ``datalake.cdc_events`` row for row once it has caught up, i.e.
the records added to an object the lake has already read are not lost. A lake whose checkpoint
is "the last raw key read" never reads that key again, and fails here with lost and stale rows.

Made deterministic, not lucky:
- the window is found: S3 is polled every 50 ms for an object whose start offset is at or past
  the sink's committed offset, with fewer records than ``file.max.records`` (so a re-cut can
  hold more). Connect is killed at once, and the committed offsets are read again to prove the
  object's records were not committed. A missed window is retried a bounded number of times;
- the re-cut holds more: while Connect restarts, a stand-in member of the sink's consumer group
  holds its partition (committing nothing) until Debezium has published every change made while
  Connect was down; then the sink redelivers from the committed offset with that backlog ready.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.streaming.topics import end_offsets
from cdc_lake_tests.faults.harness import (
    CommittedOffsets,
    FaultPipeline,
    FaultRecord,
    PartitionHolder,
    kill_service,
    start_offset,
)

FLUSH_RECORDS = 40
ATTEMPTS = 4


@dataclass(frozen=True)
class Window:
    key: str
    partition: int
    start: int
    committed: int  # the sink's committed offset in the object's partition, after the kill
    lines: int  # records in the object when Connect was killed


def kill_connect_in_commit_window(
    pipeline: FaultPipeline, stack: LocalStack, timeout_s: float = 60
) -> Window | None:
    """Kill Connect right after an upload whose offsets are not committed; None if missed."""
    cdc = pipeline.cdc
    partitions = list(end_offsets(pipeline.kafka_conf, cdc.topic_of(OUTBOX)))
    committed = CommittedOffsets(pipeline.kafka_conf, cdc.sink_consumer_group, cdc.topic_of(OUTBOX))
    try:
        keys = pipeline.raw_keys()
        last = keys[-1] if keys else None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            offsets = committed.read(partitions)
            for key in pipeline.raw_keys(start_after=last):
                last = key
                part, start = start_offset(key)
                if start < offsets.get(part, 0):
                    continue  # committed already (uploaded by the offset commit itself)
                lines = len(pipeline.raw_lines(key))
                if lines >= FLUSH_RECORDS:
                    continue  # cut by count: a re-cut would hold the same records
                kill_service(stack, "connect")
                after = committed.read([part])[part]
                if after > start:
                    return None  # the commit won the race
                return Window(key, part, start, after, lines)
            time.sleep(0.05)
        return None
    finally:
        committed.close()


def test_connect_killed_between_upload_and_offset_commit(
    make_pipeline, fault_record: FaultRecord, local_stack: LocalStack, spark
):
    fault_record.fault = "1 connect kill -9 between upload and offset commit"
    p: FaultPipeline = make_pipeline("commit_window", flush_records=FLUSH_RECORDS)
    with fault_record.phase("start"):
        p.start()

    window = None
    with fault_record.phase("find window"):
        for attempt in range(1, ATTEMPTS + 1):
            if not any(t.is_alive() for t in p.workloads):
                # Long enough to go on while Connect is down: that backlog is what the sink
                # re-cuts into the object after the restart.
                p.workload(changes=90 if attempt == 1 else 40, rate=3, seed=attempt)
            window = kill_connect_in_commit_window(p, local_stack)
            if window is not None:
                break
            local_stack.up()
            p.wait_running()
    assert window is not None, f"no kill landed in the commit window in {ATTEMPTS} attempts"

    with fault_record.phase("refresh while down"):
        during = p.refresh()  # reads the uncommitted object

    cdc = p.cdc
    holder = PartitionHolder(p.reader_conf, cdc.sink_consumer_group, cdc.topic_of(OUTBOX))
    try:
        with fault_record.phase("restart"):
            holder.wait_assigned({window.partition})
            local_stack.up()
            p.wait_running()
            p.publish_backlog()  # Debezium has sent every change made so far
            committed = CommittedOffsets(
                p.kafka_conf, cdc.sink_consumer_group, cdc.topic_of(OUTBOX)
            )
            try:
                still = committed.read([window.partition])[window.partition]
            finally:
                committed.close()
            assert still == window.committed, "the stand-in consumer must not commit"
    finally:
        holder.release()  # the sink redelivers from the committed offset

    with fault_record.phase("catch up"):
        p.workload(changes=30, rate=5, seed=10)
        p.catch_up()
    with fault_record.phase("refresh"):
        p.refresh()
    diff = p.compare(spark)
    recut = len(p.raw_lines(window.key))
    fault_record.done(
        p,
        diff,
        f"{window.key.rsplit('/', 1)[-1]}: {window.lines} records when Connect was killed "
        f"(committed offset {window.committed}), {recut} after the restart; the refresh while "
        f"down read {during.get('files_read')} objects",
    )
    assert recut > window.lines, "the fault did not happen: the object was not re-cut larger"
    assert diff.clean, diff.describe()
