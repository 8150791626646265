"""The Spark apps' parameters: the contract between Dagster, which builds them
(``LakeResource.upsert_params`` and ``order_items_params``), and the apps, which read them
(``cdc_lake/spark_apps/run.py``), on the lake server, in process or on EMR.

On the wire they are plain JSON (the lake server's request body, the Pipes extras); on each side
they are these frozen dataclasses. Each default is declared once: here, or in the table config
a parameter carries (``HudiTableConfig``, ``ItemsTableConfig``), and ``LakeResource`` takes its
own defaults from here. ``from_json`` refuses a field it does not know and a required field that
is missing, naming them, so a Dagster side and an app of different versions fail at once,
before anything is read or written, instead of running on a default.

What the apps report back (``AppReport``: metadata and check results) is read by name on the
Dagster side; those names are declared here too (``UpsertReport``, ``OrderItemsReport``), and the
lake's per-table check names with each captured table (``cdc_lake/source/captured.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, ClassVar, Final

from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.raw_lines import DEFAULT_MAX_LINE_MB
from cdc_lake.lake.schema import LakeSchema, SourceColumn
from cdc_lake.lake.table_state import DEFAULT_FULL_SCAN_EVERY
from cdc_lake.marts.items_table import ItemsTableConfig
from cdc_lake.source.captured import CapturedTable


def _checked(cls: type, app: str, data: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    required = {
        f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING
    }
    unknown, missing = sorted(set(data) - names), sorted(required - set(data))
    if unknown or missing:
        raise ValueError(
            f"the {app} app's parameters do not match this version of it:"
            + (f" unknown {', '.join(unknown)};" if unknown else "")
            + (f" missing {', '.join(missing)};" if missing else "")
            + " Dagster and the app must come from the same cdc-lake release."
        )
    return dict(data)


def _columns(value: Any) -> tuple[SourceColumn, ...] | None:
    return None if value is None else tuple(SourceColumn(**c) for c in value)


@dataclass(frozen=True)
class UpsertParams:
    """The ``upsert`` app: the raw files of ``topic`` after the table's checkpoint into the Hudi
    table ``table``, then its checks."""

    APP: ClassVar[str] = "upsert"
    REPORTS_MATERIALIZATION: ClassVar[bool] = True

    # The captured table's declaration, whole (``CapturedTable.to_json`` on the wire).
    captured: CapturedTable
    raw_bucket: str
    raw_prefix: str
    topic: str
    table: HudiTableConfig
    # The table's columns as sql/ declares them: the fallback before its first commit when the
    # source cannot be read (EMR has no sql/). None: read sql/ here.
    declared_columns: tuple[SourceColumn, ...] | None = None
    # The source table's columns as its catalog lists them now; None: keep the lake's.
    source_columns: tuple[SourceColumn, ...] | None = None
    # The table state the last run reported, which the checks go on from; None: rescan.
    previous_state: dict[str, Any] | None = None
    full_scan: bool = False
    full_scan_every: int = DEFAULT_FULL_SCAN_EVERY
    replay_from_offset: int | None = None
    scheme: str = "s3a"  # Hadoop's filesystem scheme for the raw files: s3a locally, s3 on EMR
    quarantine_path: str | None = None  # None: a bad line stops the refresh
    max_line_mb: float = DEFAULT_MAX_LINE_MB
    # The source's keys in one snapshot (``cdc_lake/lake/reconcile.py``): the live rows whose
    # key they lack are deleted. None: no reconcile.
    reconcile_keys_uri: str | None = None
    reconcile_ts_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["table"] = asdict(self.table)
        out["captured"] = self.captured.to_json()
        for name in ("declared_columns", "source_columns"):
            value = out[name]
            out[name] = None if value is None else [asdict(c) for c in value]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UpsertParams:
        values = _checked(cls, cls.APP, data)
        values["table"] = HudiTableConfig(**values["table"])
        values["captured"] = CapturedTable.from_json(values["captured"])
        for name in ("declared_columns", "source_columns"):
            values[name] = _columns(values.get(name))
        return cls(**values)


@dataclass(frozen=True)
class OrderItemsParams:
    """The ``order_items`` app: the items brought up to ``table_path``'s newest commit, or
    rebuilt in full from its snapshot (``rebuild``). ``captured``: the declaration of the table
    at ``table_path``, whole (its key is the orders' key)."""

    APP: ClassVar[str] = "order_items"
    REPORTS_MATERIALIZATION: ClassVar[bool] = True

    table_path: str
    items: ItemsTableConfig
    captured: CapturedTable
    rebuild: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "table_path": self.table_path,
            "items": asdict(self.items),
            "captured": self.captured.to_json(),
            "rebuild": self.rebuild,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OrderItemsParams:
        values = _checked(cls, cls.APP, data)
        values["items"] = ItemsTableConfig.from_json(values["items"])
        values["captured"] = CapturedTable.from_json(values["captured"])
        return cls(**values)


@dataclass(frozen=True)
class DiffParams:
    """The ``diff`` app: which live rows of the Hudi table at ``table_path`` differ from the
    source's rows in ``source_rows_uri`` (``cdc_lake/lake/diff.py``), in the ``chosen`` of
    ``buckets`` digest buckets, hashed over ``schema``'s columns. It writes nothing, and reports
    through Pipes messages, not as a materialization: a check runs it."""

    APP: ClassVar[str] = "diff"
    REPORTS_MATERIALIZATION: ClassVar[bool] = False

    table_path: str
    schema: LakeSchema
    source_rows_uri: str
    buckets: int
    chosen: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "table_path": self.table_path,
            "schema": self.schema.to_json(),
            "source_rows_uri": self.source_rows_uri,
            "buckets": self.buckets,
            "chosen": list(self.chosen),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DiffParams:
        values = _checked(cls, cls.APP, data)
        values["schema"] = LakeSchema.from_json(values["schema"])
        values["chosen"] = tuple(int(b) for b in values["chosen"])
        return cls(**values)


@dataclass(frozen=True)
class HistoryParams:
    """The ``history`` app: the history table ``history`` of the lake table at ``table_path``
    brought up to its newest commit (``cdc_lake/lake/history.py``). ``captured``: the lake
    table's declaration, whole. ``full_scan``: recompute the open versions' digest from the
    table, as every ``full_scan_every`` builds do."""

    APP: ClassVar[str] = "history"
    REPORTS_MATERIALIZATION: ClassVar[bool] = True

    table_path: str
    history: HudiTableConfig
    captured: CapturedTable
    full_scan: bool = False
    full_scan_every: int = DEFAULT_FULL_SCAN_EVERY

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["history"] = asdict(self.history)
        out["captured"] = self.captured.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HistoryParams:
        values = _checked(cls, cls.APP, data)
        values["history"] = HudiTableConfig(**values["history"])
        values["captured"] = CapturedTable.from_json(values["captured"])
        return cls(**values)


AppParams = UpsertParams | OrderItemsParams | DiffParams | HistoryParams
APPS: dict[str, type[AppParams]] = {
    p.APP: p for p in (UpsertParams, OrderItemsParams, DiffParams, HistoryParams)
}


class UpsertReport:
    """The upsert app's metadata keys that Dagster reads back."""

    COMMIT_INSTANT: Final = "commit_instant"  # the newest commit's instant, "none" before one
    NEW_COMMIT: Final = "new_commit"  # whether this run committed
    CHECKPOINT: Final = "checkpoint"  # the table's checkpoint after the run (the sensor's)
    LIVE_KEY_DIGEST: Final = "live_key_digest"  # what matches_source compares
    LAKE_SCHEMA: Final = "lake_schema"  # the lake's columns and their version
    LAYOUT_NOTE: Final = "layout_note"  # the table's layout is not the setting's: why

    # What one run read and did, each with its metadata type and its value for a run that had
    # nothing new: a run that starts no Spark reports these (``cdc_lake/defs/unchanged.py``),
    # never the last commit's, which it carries forward with the rest.
    PER_RUN: Final[dict[str, tuple[str, Any]]] = {
        "files_read": ("int", 0),
        "bytes_read": ("int", 0),
        "events_read": ("int", 0),
        "events_upserted": ("int", 0),
        "quarantined_lines": ("int", 0),
        "lines_already_ingested": ("int", 0),
        "offset_gaps": ("int", 0),
        "orders_absent_from_snapshot": ("int", 0),
        "rows_truncated": ("int", 0),
        "rows_reconciled": ("int", 0),
        "unavailable_lines_filled": ("int", 0),
        "backfilled_rows": ("int", 0),
        "backfilled_columns": ("json", []),
        "change_set": ("text", "no new commit"),
    }

    @classmethod
    def per_run(cls, **values: Any) -> dict[str, dict[str, Any]]:
        """What a run read and did, as wire metadata; every name must be one of ``PER_RUN``,
        and a name not given is its nothing-new value."""
        unknown = sorted(set(values) - set(cls.PER_RUN))
        if unknown:
            raise KeyError(f"not a per-run figure of the upsert app: {', '.join(unknown)}")
        return {
            name: {"raw_value": values.get(name, zero), "type": kind}
            for name, (kind, zero) in cls.PER_RUN.items()
        }


class DiffReport:
    """The diff app's metadata key."""

    DIFFERENCES: Final = "row_differences"  # ``RowDifferences.to_json``


class HistoryReport:
    """The history app's metadata keys and its check's name, which Dagster reads back."""

    BUILT_FROM: Final = "built_from_instant"  # the lake commit the history was built from
    LAKE_COMMIT: Final = "lake_commit_instant"  # the lake's newest commit when it was built
    OPEN_DIGEST: Final = "open_versions_digest"  # the current versions' digest
    MATCHES_LAKE_CHECK: Final = "current_versions_match_lake"


class OrderItemsReport:
    """The order items app's metadata keys and check names that Dagster reads back."""

    HUDI_COMMIT_INSTANT: Final = "hudi_commit_instant"  # the Hudi commit the build reached
    CUSTOMER_STATS: Final = "customer_stats"  # the chart's rows
    REVENUE_CHECK: Final = "revenue_non_negative"
    ORDERS_EXIST_CHECK: Final = "orders_exist_in_lake"
