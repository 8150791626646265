"""A benchmark's own pipeline on the local stack (``latency``, ``soak``): its database, topic,
slot, raw prefix and tables (the resources it is given name them) and its persistent Dagster
instance; the raw-files sensor evaluated here as ``dagster-daemon`` would (its cursor kept from
each evaluation), and whether the lake's checkpoint has every record of the topic."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dagster as dg

from bench.harness import materialize
from bench.outbox import HUDI_KEY, raw_cdc_files_sensor
from cdc_lake.defs.lake.sensors import SENSOR_RESOURCES
from cdc_lake.defs.raw.assets import raw_cdc_files
from cdc_lake.defs.source.assets import cdc_events_outbox
from cdc_lake.defs.streaming.assets import cdc_events_topic
from cdc_lake.defs.unchanged import lake_checkpoint
from cdc_lake.lake.checkpoint import Checkpoint
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack
from cdc_lake.stack.services import Postgres
from cdc_lake.streaming.topics import end_offsets


class BenchPipeline:
    def __init__(
        self, stack: LocalStack, resources: dict[str, Any], instance: dg.DagsterInstance
    ) -> None:
        self.stack, self.resources, self.instance = stack, resources, instance
        self.cdc = resources["cdc"]
        self.sensor_resources = {k: resources[k] for k in SENSOR_RESOURCES}
        self.cursor: str | None = None

    def setup(self, snapshot: Callable[[], object]) -> None:
        """The database, the outbox, topic and raw files; then ``snapshot`` (the table's first
        refresh), and the sensor's cursor past what it took."""
        pg = self.stack.service("postgres")
        assert isinstance(pg, Postgres)
        pg.create_database(self.resources["postgres"].database)
        assert materialize(
            [cdc_events_outbox, cdc_events_topic, raw_cdc_files],
            resources=self.resources,
            instance=self.instance,
        ).success
        snapshot()
        self.tick()

    def tick(self) -> bool:
        """One evaluation of the raw-files sensor; whether it asked for a run."""
        result = raw_cdc_files_sensor(
            dg.build_sensor_context(
                instance=self.instance, cursor=self.cursor, resources=self.sensor_resources
            )
        )
        if isinstance(result, dg.SensorResult):
            self.cursor = result.cursor or self.cursor
            return bool(result.run_requests)
        return False

    def caught_up(self) -> bool:
        """Whether the lake's checkpoint has every record of the topic."""
        stored = lake_checkpoint(self.instance, HUDI_KEY)
        if not stored:
            return False
        cp = Checkpoint.from_json(stored)
        ends = end_offsets(self.resources["kafka"].client_conf(), self.cdc.topic_of(OUTBOX))
        return all(cp.offset(p) >= end - 1 for p, end in ends.items())
