"""Raw CDC files written by hand, in the S3 sink's layout: for tests and benchmarks of the lake."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.raw_lines import RawSource
from cdc_lake.lake.schema.columns import KIND_VALUES
from cdc_lake.lake.tables import declared_columns, declared_schema
from cdc_lake.source.captured import OUTBOX

# The default pipeline's topic name, under a prefix of its own.
TOPIC = "cdc.datalake.cdc_events"

# The outbox's lake schema as sql/ declares it: the schema that the lake's functions take, for
# the tests and benchmarks of the outbox's table (a lake run reads it from the source instead).
OUTBOX_SCHEMA = declared_schema(OUTBOX)
# The outbox's columns as sql/ declares them: what Dagster sends the upsert app as the table's
# columns before its first commit (UpsertParams.declared_columns), for callers without Dagster.
OUTBOX_COLUMNS = tuple(declared_columns(OUTBOX))


def event(
    order_id: int,
    ts: int,
    lsn: int,
    op: str = "u",
    deleted: bool = False,
    shipped_date: int | None = 10000,
    order_date: int = 9700,
    items: list[dict[str, Any]] | None = None,
    customer_id: str = "ALFKI",
    **values: Any,
) -> dict[str, Any]:
    """One outbox change as the sink writes it: every column of the outbox (as ``sql/``
    declares it; ``values`` for any of them, or for columns added since), then Debezium's
    fields."""
    items = items if items is not None else [
        {"product_id": 1, "unit_price": 10.0, "quantity": 2, "discount": 0.0}
    ]  # fmt: skip
    products = [{"product_id": i["product_id"], "product_name": f"P{i['product_id']}"}
                for i in items]  # fmt: skip
    given = {
        "order_id": order_id, "customer_id": customer_id, "order_date": order_date,
        "required_date": order_date + 28, "shipped_date": shipped_date,
        "order_items": json.dumps(items), "products": json.dumps(products),
        "customer": json.dumps({"customer_id": customer_id}), "employee": "{}",
        "shipper": "{}", "shipment": json.dumps({"freight": 1.5}),
        "updated_at": "2026-01-01T00:00:00Z", **values,
    }  # fmt: skip
    # Values for columns sql/ does not declare (added at the source since) come after.
    columns = {
        c.name: given[c.name] if c.name in given else KIND_VALUES[c.kind]
        for c in OUTBOX_SCHEMA.columns
    } | given
    return {
        **columns, "__deleted": "true" if deleted else "false", "__op": op, "__db": "cdc_lake",
        "__table": "cdc_events", "__schema": "datalake", "__lsn": lsn, "__source_ts_ms": ts,
    }  # fmt: skip


@dataclass
class SyntheticLake:
    """A raw prefix and a Hudi table of their own, so tests never disturb the real pipeline."""

    client: Any
    raw_bucket: str
    lake_bucket: str
    name: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    next_offset: dict[int, int] = field(default_factory=dict)

    @property
    def raw_prefix(self) -> str:
        return f"synthetic/{self.name}/"

    @property
    def source(self) -> RawSource:
        return RawSource(self.raw_bucket, self.raw_prefix, TOPIC)

    def table(self, **overrides: Any) -> HudiTableConfig:
        return HudiTableConfig(
            base_path=f"s3a://{self.lake_bucket}/synthetic/{self.name}/cdc_events", **overrides
        )

    @property
    def quarantine_path(self) -> str:
        return f"s3a://{self.lake_bucket}/synthetic/{self.name}/quarantine"

    def key(self, partition: int, offset: int) -> str:
        return self.source.layout.key(partition, offset)

    def put(
        self,
        lines: Sequence[dict[str, Any] | str],
        partition: int = 0,
        start: int | None = None,
        kafka_fields: bool = True,
    ) -> str:
        """One raw object holding these events, as the sink writes it: at the partition's next
        offset, or at ``start`` (to re-cut or overwrite an object). Events get their Kafka
        coordinates unless ``kafka_fields`` is off (lines written before the sink added them);
        a str is written as the line, verbatim."""
        offset = self.next_offset.get(partition, 0) if start is None else start
        self.next_offset[partition] = max(self.next_offset.get(partition, 0), offset + len(lines))
        key = self.key(partition, offset)
        out = []
        for i, x in enumerate(lines):
            if not isinstance(x, str):
                if kafka_fields:
                    x = {
                        **x,
                        "__kafka_topic": TOPIC,
                        "__kafka_partition": partition,
                        "__kafka_offset": offset + i,
                    }
                x = json.dumps(x)
            out.append(x + "\n")
        self.client.put_object(Bucket=self.raw_bucket, Key=key, Body="".join(out).encode())
        return key
