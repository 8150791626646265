"""Fault 7: raw objects deleted or rewritten after the lake has read them.

After a refresh has ingested them, three raw objects are tampered with on S3: one is deleted,
one is uploaded again with every line twice, one is uploaded again truncated to its first half
(whole lines). More changes follow, and the lake is refreshed again.

Proves: what happens to objects the lake has already read changes nothing, neither the rows
they produced nor the ingestion of what comes after them; the lake equals
``datalake.cdc_events`` row for row.
"""

from __future__ import annotations

from cdc_lake.stack import LocalStack
from cdc_lake_tests.faults.harness import FaultPipeline, FaultRecord


def short(key: str) -> str:
    return key.rsplit("+", 1)[-1]


def test_raw_objects_deleted_and_rewritten_after_ingest(
    make_pipeline, fault_record: FaultRecord, local_stack: LocalStack, spark
):
    fault_record.fault = "7 raw objects deleted/rewritten after ingest"
    p: FaultPipeline = make_pipeline("raw_tamper")
    with fault_record.phase("start"):
        p.start()
        p.workload(changes=40, rate=5, seed=7)
        p.catch_up()
    with fault_record.phase("first refresh"):
        p.refresh()

    keys = [k for k in p.raw_keys() if len(p.raw_lines(k)) >= 2]
    assert len(keys) >= 3, f"too few raw objects to tamper with: {keys}"
    deleted, doubled, truncated = keys[len(keys) // 4], keys[len(keys) // 2], keys[-1]
    bucket = p.cdc.raw_bucket
    p.s3.delete_object(Bucket=bucket, Key=deleted)
    lines = p.raw_lines(doubled)
    p.s3.put_object(Bucket=bucket, Key=doubled, Body="".join(f"{x}\n" for x in lines * 2))
    lines = p.raw_lines(truncated)
    half = lines[: len(lines) // 2]
    p.s3.put_object(Bucket=bucket, Key=truncated, Body="".join(f"{x}\n" for x in half))

    with fault_record.phase("catch up"):
        p.workload(changes=40, rate=5, seed=8)
        p.catch_up()
    with fault_record.phase("refresh"):
        p.refresh()
    diff = p.compare(spark)
    fault_record.done(
        p,
        diff,
        f"deleted {short(deleted)}, doubled {short(doubled)}, truncated {short(truncated)} "
        f"({len(lines)} -> {len(half)} lines)",
    )
    assert diff.clean, diff.describe()
