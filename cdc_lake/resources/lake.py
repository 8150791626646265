"""The lake's resource: where the Hudi table and the order items live, and how they are written.

It only builds parameters (``cdc_lake/spark_apps/params.py``: JSON on the wire, the same
locally and on EMR).
Writing is the Spark launchers' part (``cdc_lake/resources/spark.py``). In production both Hudi
tables, ``cdc_events`` and ``order_items``, sync themselves into Glue as they commit (Hudi's
meta sync, ``cdc_lake/aws/glue.py``).
"""

from __future__ import annotations

from dataclasses import MISSING, fields, replace
from typing import Any

import dagster as dg

from cdc_lake.aws.glue import glue_sync_options
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.ordering import DeleteMode
from cdc_lake.lake.schema import SourceColumn
from cdc_lake.lake.tables import declared_columns
from cdc_lake.marts.items_table import ItemsTableConfig
from cdc_lake.resources.streaming import CdcPipelineResource
from cdc_lake.source.captured import CapturedTable, mart_table
from cdc_lake.spark_apps.params import HistoryParams, OrderItemsParams, UpsertParams
from cdc_lake.streaming.connect_config import CdcConnectorSettings

# How the Hudi table is written, and the defaults, are declared once, in HudiTableConfig; the
# upsert app's own settings in UpsertParams.
_TABLE = {f.name: f.default for f in fields(HudiTableConfig) if f.default is not MISSING}
_PARAMS = {f.name: f.default for f in fields(UpsertParams) if f.default is not MISSING}


class LakeResource(dg.ConfigurableResource):
    """Where the lake lives and how its Hudi tables are written. The fields it shares with
    ``HudiTableConfig`` take their defaults from there, and are passed on by name.

    Every captured table is laid out by one rule, from its declaration
    (``cdc_lake/source/captured.py``): its Hudi table at ``<lake_prefix>/<name>``, its bad lines
    at ``<quarantine_prefix>/<name>``, partitioned as it declares."""

    lake_bucket: str
    scheme: str = _PARAMS["scheme"]  # Hadoop's filesystem scheme: s3a locally, s3 on EMR
    lake_prefix: str = "lake"
    order_items_prefix: str = "marts/order_items"
    quarantine_prefix: str = "quarantine"
    table_type: str = _TABLE["table_type"]
    delete_mode: DeleteMode = _TABLE["delete_mode"]
    quarantine: bool = False
    # A longer raw line is a bad line ("line N is X MB, over the limit of Y MB"), not parsed.
    max_line_mb: float = _PARAMS["max_line_mb"]
    parallelism: int = _TABLE["parallelism"]
    compaction_delta_commits: int = _TABLE["compaction_delta_commits"]
    index_type: str = _TABLE["index_type"]  # or GLOBAL_SIMPLE; both global
    # Hudi's timeline server in the driver binds every interface: off locally, on for EMR.
    embedded_timeline_server: bool = _TABLE["embedded_timeline_server"]
    # Each commit's change set (cdc_lake/lake/change_sets.py): what the incremental checks and
    # the order items follow. On by default.
    change_sets: bool = _TABLE["change_sets"]
    # Hudi's change feed (before and after images per commit, uncompressed): off by default, for
    # readers that want Hudi's CDC queries. Takes effect when the table is created.
    change_feed: bool = _TABLE["change_feed"]
    # The checks follow the commits' changes; every this many commits they rescan the table.
    full_scan_every: int = _PARAMS["full_scan_every"]
    hudi_options: dict[str, str] = {}
    # Production: Hudi meta sync of the lake tables and the order items into this database.
    # None: no Glue catalog (locally, or CDC_LAKE_GLUE_DATABASE=none).
    glue_database: str | None = _TABLE["glue_database"]
    region: str = CdcConnectorSettings.region

    def uri(self, prefix: str) -> str:
        return f"{self.scheme}://{self.lake_bucket}/{prefix}"

    def table_prefix_of(self, table: CapturedTable) -> str:
        """The key prefix of ``table``'s Hudi table (``lake/cdc_events``, ``lake/customers``)."""
        return f"{self.lake_prefix.strip('/')}/{table.name}".lstrip("/")

    def quarantine_prefix_of(self, table: CapturedTable) -> str:
        """The key prefix of ``table``'s bad lines (``quarantine/cdc_events``)."""
        return f"{self.quarantine_prefix.strip('/')}/{table.name}".lstrip("/")

    def table_path_of(self, table: CapturedTable) -> str:
        return self.uri(self.table_prefix_of(table))

    @property
    def order_items_path(self) -> str:
        return self.uri(self.order_items_prefix)

    def table_config(self, table: CapturedTable) -> HudiTableConfig:
        """How the Hudi table of ``table`` is written: partitioned as its declaration says."""
        shared = {name: getattr(self, name) for name in _TABLE if name in type(self).model_fields}
        return HudiTableConfig(
            base_path=self.table_path_of(table),
            table_name=table.name,
            partition_field=table.layout_field,
            extra_options=dict(self.hudi_options),
            **shared,
        )

    def upsert_params(
        self,
        cdc: CdcPipelineResource,
        replay_from_offset: int | None = None,
        previous_state: dict[str, Any] | None = None,
        full_scan: bool = False,
        source_columns: list[SourceColumn] | None = None,
        *,
        table: CapturedTable,
    ) -> UpsertParams:
        """The ``upsert`` app's parameters for the captured ``table``, the same for local Spark
        and EMR. ``previous_state``: the table state the last run reported
        (``live_key_digest``), which the checks go on from; ``full_scan``: rescan the table in
        full instead; ``source_columns``: the source table's columns, as its catalog lists them
        now."""
        quarantine = self.uri(self.quarantine_prefix_of(table))
        return UpsertParams(
            captured=table,
            raw_bucket=cdc.raw_bucket,
            raw_prefix=cdc.raw_prefix,
            topic=cdc.topic_of(table),
            table=self.table_config(table),
            declared_columns=tuple(declared_columns(table)) or None,
            source_columns=None if source_columns is None else tuple(source_columns),
            previous_state=previous_state,
            full_scan=full_scan,
            full_scan_every=self.full_scan_every,
            replay_from_offset=replay_from_offset,
            scheme=self.scheme,
            quarantine_path=quarantine if self.quarantine else None,
            max_line_mb=self.max_line_mb,
        )

    def history_config(self, table: CapturedTable) -> HudiTableConfig:
        """How the history table of ``table`` is written: beside its lake table
        (``<lake_prefix>/<name>_history``), as the lake table is but not partitioned, and with
        no change sets (nothing follows it)."""
        config = self.table_config(table)
        return replace(
            config,
            base_path=f"{config.base_path}_history",
            table_name=f"{table.name}_history",
            partition_field="",
            change_sets=False,
            change_feed=False,
            glue_database=self.glue_database,
        )

    def history_params(self, table: CapturedTable, full_scan: bool = False) -> HistoryParams:
        """The ``history`` app's parameters for the captured ``table`` (its declaration keeps
        a history); ``full_scan``: recompute the open versions' digest from the table."""
        return HistoryParams(
            self.table_path_of(table),
            self.history_config(table),
            table,
            full_scan=full_scan,
            full_scan_every=self.full_scan_every,
        )

    @property
    def order_items_figures_path(self) -> str:
        """Beside the items table: the per-customer figures of each build."""
        return self.uri(self.order_items_prefix.rstrip("/") + "_figures")

    def order_items_config(self) -> ItemsTableConfig:
        catalog = {}
        if self.glue_database:
            catalog = glue_sync_options(self.glue_database, ItemsTableConfig.table_name, "")
        return ItemsTableConfig(
            base_path=self.order_items_path,
            figures_root=self.order_items_figures_path,
            parallelism=self.parallelism,
            embedded_timeline_server=self.embedded_timeline_server,
            extra_options=catalog,
        )

    def order_items_params(self, rebuild: bool = False) -> OrderItemsParams:
        """The ``order_items`` app's parameters; ``rebuild``: from the snapshot, in full. The
        items are built from the lake table of the captured table that declares them."""
        orders = mart_table(ItemsTableConfig.table_name)
        return OrderItemsParams(
            self.table_path_of(orders), self.order_items_config(), orders, rebuild=rebuild
        )

    @property
    def order_items_glue_table(self) -> str | None:
        """The items' Glue table, which Hudi syncs as it commits; None without Glue."""
        if not self.glue_database:
            return None
        return f"{self.glue_database}.{ItemsTableConfig.table_name}"
