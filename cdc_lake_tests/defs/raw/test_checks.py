"""The raw asset's ``pending_raw_objects`` check on the real S3 server, with the lake
materialised for real: it counts what the next refresh would ingest, from the lake's own
checkpoint, and WARNs past its threshold."""

from __future__ import annotations

import dagster as dg

from bench.outbox import cdc_events_hudi, pending_raw_objects
from bench.synthetic import SyntheticLake, event
from cdc_lake.resources.local import local_resources
from cdc_lake.stack import LocalStack


def test_pending_objects_follow_the_lake_checkpoint(local_stack: LocalStack, secret_env):
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    lake = SyntheticLake(client, s.raw_bucket, s.lake_bucket)
    table = {"lake_prefix": f"synthetic/{lake.name}"}
    instance = dg.DagsterInstance.ephemeral()

    def evaluate(warn_over: int) -> dg.AssetCheckResult:
        r = local_resources(
            s, lake=table, raw_prefix=lake.raw_prefix, pending_objects_warn=warn_over
        )
        context = dg.build_asset_check_context(instance=instance)
        result = pending_raw_objects(context, s3=r["s3"], cdc=r["cdc"])
        assert isinstance(result, dg.AssetCheckResult)
        return result

    keys = [lake.put([event(i, 100, i)], partition=i % 2) for i in range(3)]
    over = evaluate(warn_over=2)  # the lake has never run: all three wait for it
    assert not over.passed and over.severity == dg.AssetCheckSeverity.WARN
    assert over.metadata["pending_objects"].value == 3
    assert over.metadata["oldest_pending"].value == min(keys)
    assert over.description and "3 raw objects wait" in over.description
    under = evaluate(warn_over=3)
    assert under.passed and under.metadata["pending_objects"].value == 3

    resources = local_resources(s, lake=table, raw_prefix=lake.raw_prefix)
    assert dg.materialize([cdc_events_hudi], resources=resources, instance=instance).success
    newer = lake.put([event(7, 200, 7)], partition=1)
    after = evaluate(warn_over=0)  # only the object past the lake's checkpoint is pending
    assert not after.passed and after.metadata["pending_objects"].value == 1
    assert after.metadata["oldest_pending"].value == newer
