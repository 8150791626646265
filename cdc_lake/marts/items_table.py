"""The order items as a Hudi table, and what each of its commits records.

Table
    COPY_ON_WRITE, not partitioned, one record per line keyed by (order_id, product_id)
    (``ITEM_KEY``, Hudi's complex key generator), without Hudi's metadata table; the default
    (simple) index reads the key column of its few files to place an upsert. No ordering
    field: within a commit a key appears once, and across commits the later commit wins
    (``COMMIT_TIME_ORDERING``), since each build writes the lines as they are now. Deletes
    travel in the same commit as the upserts, flagged by ``_hoodie_is_deleted`` (so the
    table's schema holds that column, always false; ``read_order_items`` leaves it out).

Build state
    Each commit carries in its extra metadata (``STATE_KEY``, written atomically with the
    lines) the ``cdc_events`` commit it was built from (instant and completion time) and where
    the figures of the lines it left are (``cdc_lake/marts/figures.py``: a small Parquet file
    per build, written before the commit and named by it, so a failed commit leaves only an
    unreferenced file). The next build starts from there: ``BuildState.of``.

One build's rows (``line_changes``)
    From the old and new lines of the orders that changed: the new lines that differ from the
    old ones (upserts), and the keys of old lines that no new line has (deletes). Lines that
    did not change are not written again; no rows at all means no commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake.hudi import timeline_server_options
from cdc_lake.marts.order_items import ITEM_COLUMNS, ITEM_KEY

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

STATE_KEY = "_cdc_lake_order_items"  # the Hudi commit's extra-metadata key
DELETE_MARKER = "_hoodie_is_deleted"


@dataclass(frozen=True)
class BuildState:
    built_from_instant: str  # the cdc_events commit the lines are built from (requested time)
    built_from_completed: str  # its completion time: where the next change-feed read starts
    figures_path: str  # the figures of exactly these lines

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": 1,
                "built_from": {
                    "instant": self.built_from_instant,
                    "completed": self.built_from_completed,
                },
                "figures": self.figures_path,
            },
            sort_keys=True,
        )

    @staticmethod
    def of(extra: Mapping[str, str]) -> BuildState | None:
        """The state in a commit's extra metadata (None: not a build's commit)."""
        raw = extra.get(STATE_KEY)
        if not raw:
            return None
        data = json.loads(raw)
        built = data["built_from"]
        return BuildState(str(built["instant"]), str(built["completed"]), str(data["figures"]))


@dataclass(frozen=True)
class ItemsTableConfig:
    base_path: str
    figures_root: str  # each build's figures go in a directory under it
    table_name: str = "order_items"
    parallelism: int = 2
    # The driver's timeline server listens on every interface: only where executors need it.
    embedded_timeline_server: bool = False
    # Passed through as they are, e.g. Glue sync options in production.
    extra_options: dict[str, str] = field(default_factory=dict)

    def write_options(self, operation: str, state: BuildState) -> dict[str, str]:
        """``upsert`` for a build from the change feed, ``insert_overwrite_table`` for a full
        one (one replace commit: readers see the old lines or the new, never none)."""
        p = str(self.parallelism)
        return {
            "hoodie.table.name": self.table_name,
            "hoodie.datasource.write.table.name": self.table_name,
            "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
            "hoodie.datasource.write.operation": operation,
            "hoodie.datasource.write.recordkey.field": ",".join(ITEM_KEY),
            "hoodie.datasource.write.partitionpath.field": "",
            "hoodie.datasource.write.keygenerator.class": (
                "org.apache.hudi.keygen.ComplexKeyGenerator"
            ),
            "hoodie.write.record.merge.mode": "COMMIT_TIME_ORDERING",
            "hoodie.combine.before.upsert": "false",  # a build writes each key once
            # One directory of a few files: listing it is one request, which costs less than
            # keeping Hudi's metadata table (and its indexes) up to date on every commit.
            "hoodie.metadata.enable": "false",
            "hoodie.upsert.shuffle.parallelism": p,
            "hoodie.insert.shuffle.parallelism": p,
            "hoodie.delete.shuffle.parallelism": p,
            "hoodie.bulkinsert.shuffle.parallelism": p,
            **timeline_server_options(self.embedded_timeline_server),
            # Options starting with "_" become the commit's extra metadata.
            STATE_KEY: state.to_json(),
            **self.extra_options,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ItemsTableConfig:
        return ItemsTableConfig(**data)


def as_written(lines: DataFrame, deleted: bool = False) -> DataFrame:
    """Lines as the table receives them: its columns and the delete marker."""
    return lines.select(*ITEM_COLUMNS, F.lit(deleted).alias(DELETE_MARKER))


def line_changes(old: DataFrame, new: DataFrame) -> DataFrame:
    """One build's rows: the ``new`` lines that differ from the ``old`` ones, and the keys of
    ``old`` lines that no new line has, as deletes (keys compared null-safe, like Hudi's)."""
    keys = new.select(*[F.col(k).alias(f"_new_{k}") for k in ITEM_KEY])
    same_key = [F.col(k).eqNullSafe(F.col(f"_new_{k}")) for k in ITEM_KEY]
    gone = old.join(keys, same_key[0] & same_key[1], "left_anti")
    return as_written(new.select(*ITEM_COLUMNS).subtract(old.select(*ITEM_COLUMNS))).unionByName(
        as_written(gone, deleted=True)
    )
