"""The history table of a captured table: every version of every row its lake table has held,
with the source times it was valid (a type 2 slowly changing dimension). Opt-in per table
(``CapturedTable.history``); written by the ``history`` app (``cdc_lake/spark_apps/history.py``).

Rows
    One per version: the table's columns as the lake holds them (lake-typed; an excluded column
    is not there, a hashed one is hashed), the lake's own ``cdc_op`` (the change that made the
    version: ``c``, ``u``, or ``r`` for a snapshot read), ``cdc_lsn``, ``cdc_source_ts_ms`` and
    ``cdc_ordering``, then ``valid_from`` (that change's source time) and ``valid_to`` (the
    source time of the change that ended it: the next version's, a delete's, a truncate's, the
    snapshot's that no longer held the row; null while the version is current). The record key
    is the table's key and ``cdc_ordering``: versions are closed, never deleted, so the table
    only grows. The rows valid at a time T are those with ``valid_from <= T`` and ``valid_to``
    null or after T; a version that began and ended in the same millisecond is valid at none.

Versions are the lake table's
    A version is a row the lake table held after one of its commits, so the history follows
    the lake's merge rule (``cdc_lake/lake/ordering.py``): a change that lost to a newer one is
    no version, and the changes one refresh applied to a key collapse to the one that won, as
    they do in the lake table. A column given to stored rows (``ADD COLUMN ... DEFAULT``) is
    given to their open versions too, in place: same key, same ordering.

Incremental build (``version_rows``), the usual case
    The change sets of the lake commits since the one the history was built from
    (``cdc_lake/lake/change_sets.py``) give, per commit and key, the row before and after it.
    A live ``after`` that differs from ``before`` opens a version; a live ``before`` whose
    ordering the ``after`` does not keep is closed, at the ``after``'s source time, or at the
    time of the delete the commit applied when there is no ``after`` (``_applied_ts_ms``). One
    Hudi upsert writes the versions opened and closed. It reads neither the lake table nor the
    history table; Hudi's upsert rewrites the file groups that hold the versions it closes, as
    the lake's upsert rewrites those of the rows it changes. Where one commit left a key twice
    (the change sets' docstring), either after row may be taken.

Full build (``reconcile_rows``)
    When there is nothing to follow from (no history table yet, a lake commit since without a
    change set, the commit built from archived): the lake's live rows as of its newest commit
    against the history's open versions. A live row no open version equals opens one; an open
    version the lake no longer holds is closed, at the source time of the key's row (its live
    row, or its soft delete), or at the lake commit's time when the key is gone (the time of a
    hard delete is lost with the change set). Versions closed before stay as they are; the
    versions the lake held in between, if any, are lost.

Exactly once
    Each history commit records, atomically with its rows, the lake commit it was built from
    (``STATE_KEY``, ``HistoryState``). A build that fails commits nothing (Hudi rolls it back)
    and the next starts from the last recorded lake commit again; writing a version again
    gives the same row, so a replay of the lake changes nothing here either.

The check (``cdc_lake/defs/lake/history.py``)
    The open versions' digest (``cdc_lake/lake/digest.py``) is kept in the state, updated by
    each build from what it writes (plus the versions it leaves open, minus the open versions
    it closes or rewrites). After a full build, every ``full_scan_every`` builds, when the
    lake's columns changed and on request, it is read back from the committed table instead.
    It must equal the digest of the lake's live rows at the same commit: keys and content.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake.change_sets import APPLIED_TS
from cdc_lake.lake.changes import image_schema
from cdc_lake.lake.ordering import ORDERING_FIELD, live_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from cdc_lake.lake.schema import LakeSchema

STATE_KEY = "_cdc_lake_history"  # the Hudi commit's extra-metadata key
VALID_FROM, VALID_TO = "valid_from", "valid_to"
# The lake's flag is no column of a version: a deleted row is no version.
_FLAG = "is_deleted"


def history_schema(schema: LakeSchema) -> LakeSchema:
    """The history table's schema for writing: the lake table's (``schema``), keyed by the
    table's key and the version's ordering."""
    return replace(schema, keys=(*schema.keys, ORDERING_FIELD))


def version_columns(schema: LakeSchema) -> list[str]:
    """A version's columns before ``valid_from`` and ``valid_to``: the image's, but the flag."""
    return [f.name for f in image_schema(schema).fields if f.name != _FLAG]


@dataclass(frozen=True)
class HistoryState:
    """What a history commit records: the lake commit it was built from, and its open versions'
    digest with how many builds ago it was last recomputed from the table."""

    built_from_instant: str
    built_from_completed: str
    digest: dict[str, Any]
    builds_since_full: int = 0

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": 1,
                "built_from": {
                    "instant": self.built_from_instant,
                    "completed": self.built_from_completed,
                },
                "digest": self.digest,
                "builds_since_full": self.builds_since_full,
            },
            sort_keys=True,
        )

    @staticmethod
    def of(extra: Mapping[str, str]) -> HistoryState | None:
        """The state in a commit's extra metadata (None: not a history build's commit)."""
        raw = extra.get(STATE_KEY)
        if not raw:
            return None
        data = json.loads(raw)
        built = data["built_from"]
        return HistoryState(
            str(built["instant"]),
            str(built["completed"]),
            dict(data["digest"]),
            int(data.get("builds_since_full", 0)),
        )


def _live(image: Column) -> Column:
    return image.isNotNull() & ~F.coalesce(image[_FLAG], F.lit(False))


def as_versions(rows: DataFrame, schema: LakeSchema, valid_to_ms: Column) -> DataFrame:
    """Lake rows (live) as history rows, ``valid_to`` from ``valid_to_ms`` (null: current)."""
    return rows.select(
        *version_columns(schema),
        F.timestamp_millis(F.col("cdc_source_ts_ms")).alias(VALID_FROM),
        F.timestamp_millis(valid_to_ms).alias(VALID_TO),
    )


@dataclass(frozen=True)
class Versions:
    """One build's rows (``rows``: the versions opened, closed or rewritten, as written) and,
    for the digest, the open versions it replaces (``replaced``: as they were, lake rows)."""

    rows: DataFrame
    replaced: DataFrame
    kept: DataFrame  # cached for the write and the digests: ``unpersist`` when done

    def still_open(self) -> DataFrame:
        return self.rows.where(F.col(VALID_TO).isNull())

    def unpersist(self) -> None:
        self.kept.unpersist()


def version_rows(sides: DataFrame, schema: LakeSchema) -> Versions:
    """The versions the change sets ``sides`` (``read_change_set_sides`` of the commits after
    the one built from) open and close; see the module docstring. ``schema``: the lake's."""
    keys = list(schema.keys)
    cols = [f.name for f in image_schema(schema).fields]
    image = F.struct(*[F.col(c) for c in cols])
    side = F.col("_side")
    per_commit = sides.groupBy(*keys, "_commit").agg(
        F.first(F.when(side == "before", image), ignorenulls=True).alias("b"),
        F.first(F.when(side == "after", image), ignorenulls=True).alias("a"),
        F.max(APPLIED_TS).alias("_applied"),
        F.max("_commit_ms").alias("_commit_ms"),
    )
    b, a = F.col("b"), F.col("a")
    changed = ~b.eqNullSafe(a)
    # The before version ends unless the after is the same version (same ordering, maybe a
    # column given to it): at the after's time, the applied delete's, or the commit's.
    ends = a.isNull() | (a[ORDERING_FIELD] != b[ORDERING_FIELD])
    end_ms = F.coalesce(a["cdc_source_ts_ms"], F.col("_applied"), F.col("_commit_ms"))
    events = per_commit.select(
        F.explode(
            F.array(
                F.when(
                    _live(b) & changed,
                    F.struct(
                        b.alias("v"),
                        F.when(ends, end_ms).alias("end"),
                        F.concat(F.col("_commit"), F.lit("0")).alias("at"),
                    ),
                ),
                F.when(
                    _live(a) & changed,
                    F.struct(
                        a.alias("v"),
                        F.lit(None).cast("long").alias("end"),
                        F.concat(F.col("_commit"), F.lit("1")).alias("at"),
                    ),
                ),
            )
        ).alias("e")
    ).where(F.col("e").isNotNull())
    version_key = [F.col(f"e.v.{k}").alias(k) for k in (*keys, ORDERING_FIELD)]
    per_version = events.groupBy(*version_key).agg(
        # The content and the end written last (a version closed, then open again: open);
        # where the version came from (a before: it was open).
        F.max_by(F.col("e.v"), F.col("e.at")).alias("last"),
        F.min_by(F.struct(F.col("e.v"), F.col("e.at").endswith("0").alias("pre")), F.col("e.at"))
        .alias("first"),
        F.max_by(F.col("e.end"), F.col("e.at")).alias("end"),
    ).persist()
    rows = as_versions(per_version.select("last.*", "end"), schema, F.col("end"))
    replaced = per_version.where(F.col("first.pre")).select("first.v.*")
    return Versions(rows, replaced, per_version)


def reconcile_rows(
    table: DataFrame, stored_open: DataFrame | None, schema: LakeSchema, gone_at_ms: int
) -> DataFrame:
    """A full build's rows (see the module docstring): ``table``, the lake table's rows (a
    soft-deleted one, flagged, gives the time of its delete); the history's open versions
    ``stored_open`` (None: no history table yet); ``gone_at_ms``, when to close a version whose
    key the lake no longer holds at all."""
    keys = list(schema.keys)
    cols = version_columns(schema)
    lake = live_rows(table).select(*cols)
    if stored_open is None:
        return as_versions(lake, schema, F.lit(None).cast("long"))
    stored = stored_open.select(*[
        F.col(c) if c in stored_open.columns
        else F.lit(None).cast(lake.schema[c].dataType).alias(c)
        for c in cols
    ])  # fmt: skip
    opened = lake.subtract(stored)
    now = table.select(*keys, F.col("cdc_source_ts_ms").alias("_now_ts"))
    closed = (
        stored.join(lake.select(*keys, ORDERING_FIELD), [*keys, ORDERING_FIELD], "left_anti")
        .join(now, keys, "left")
        .withColumn("_end", F.coalesce(F.col("_now_ts"), F.lit(gone_at_ms)))
    )
    return as_versions(opened, schema, F.lit(None).cast("long")).unionByName(
        as_versions(closed, schema, F.col("_end"))
    )


def open_versions(history: DataFrame, schema: LakeSchema) -> DataFrame:
    """The current versions of a history table's rows, with every column of the lake's
    ``schema``: one the history has not taken yet (added at the source and no version written
    since) is null, as it is in the lake's rows stored before it."""
    current = history.where(F.col(VALID_TO).isNull())
    lake = {c.name: c.lake_type for c in schema.columns}
    missing = [c for c in version_columns(schema) if c not in current.columns]
    return current.select(
        "*", *[F.lit(None).cast(lake.get(c, "string")).alias(c) for c in missing]
    )
