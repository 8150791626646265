"""The outbox's Dagster definitions, by name, for the benchmarks and the tests that drive the
outbox's pipeline. The package keeps its definitions per captured table, with no name for one
table's; these are the same objects, picked by the outbox's declaration."""

from __future__ import annotations

from cdc_lake.defs.keys import table_keys
from cdc_lake.defs.lake.assets import hudi_tables
from cdc_lake.defs.lake.checks import table_checks
from cdc_lake.defs.lake.jobs import hudi_op, refresh_jobs
from cdc_lake.defs.lake.sensors import table_sensors
from cdc_lake.defs.raw.checks import table_raw_checks
from cdc_lake.source.captured import OUTBOX

OUTBOX_KEYS = table_keys(OUTBOX)
OUTBOX_KEY = OUTBOX_KEYS.source
TOPIC_KEY = OUTBOX_KEYS.topic
RAW_KEY = OUTBOX_KEYS.raw
HUDI_KEY = OUTBOX_KEYS.hudi
HUDI_OP = hudi_op(HUDI_KEY)

cdc_events_hudi = hudi_tables[OUTBOX]
lake_refresh_job = refresh_jobs[OUTBOX]
raw_cdc_files_sensor = table_sensors[OUTBOX]
no_quarantined_lines, matches_source, schema_matches_source = table_checks[OUTBOX]
sink_consumer_lag, pending_raw_objects = table_raw_checks[OUTBOX]
