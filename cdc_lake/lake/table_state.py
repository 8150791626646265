"""The Hudi table's CDC invariants after a commit: unique keys, no deleted row left, and the
digest of the live rows that ``matches_source`` compares with the outbox.

Two ways to the same state
    **Full**: one read of the whole snapshot (``full_state``). Its cost grows with the table.
    **Incremental**: the state the previous run reported, plus what the commits since did to
    the rows they changed (``incremental_state``), read from their change sets
    (``cdc_lake/lake/change_sets.py``), or from Hudi's change feed on a table created with it
    (``cdc_lake/lake/changes.py``): each changed order's row before the range is subtracted
    from the digest and its row after the range added, and the counts of rows and of rows
    flagged as deleted move the same way. Its cost grows with the changes, not the table.
    Both give bit-identical digests on the same table (``digest`` sums are exact integers).

Which one runs (``evaluate``)
    Incremental when the previous state is usable: it names a commit still on the active
    timeline, every commit since has a trusted change set or the table a change feed that covers
    them on COPY_ON_WRITE (``changes_between``), and fewer than ``full_scan_every`` commits were
    evaluated incrementally since the last full scan (a MERGE_ON_READ table's delta commits have
    no change set, and its feed is exact but costs what a rescan costs: "Table types" in
    ``cdc_lake/lake/changes.py``). ``followed`` in the state says which. Otherwise, or when
    asked (``full_scan``), a full scan. A full scan that could also have gone incrementally
    computes both and reports whether they agree (``incremental_matches_rescan``): the named
    check that a schedule or any run can request (``full_scan`` in the lake asset's run config).
    With nothing committed since the previous state, that state is the answer and nothing is
    read.

What the incremental checks see
    ``order_id_unique``: an order written twice by one commit (two after rows: change sets
    hold what the new file versions hold, e.g. a partition move that kept its old row while an
    update landed) fails it. A duplicate that one
    commit cannot show (an insert of a key a stale file still holds) changes the digest's key
    part, so ``matches_source`` fails with a key difference, and the next full scan fails this
    check. ``no_deleted_orders``: the count of rows flagged as deleted, kept exactly (+ flagged
    after-images, - flagged before-images); with hard deletes it must stay 0.

The state travels as JSON, the ``live_key_digest`` metadata of the lake asset: the digest of
``cdc_lake/lake/digest.py`` (``version``, ``buckets``, ``rows``, ``digest``) plus ``instant``
and ``completed`` (the commit it describes), ``mode`` (full, incremental, carried),
``commits_since_full``, ``flagged_rows``, ``table_rows`` and ``last_rescan`` (the newest full
scan's commit and, if it was compared with a state kept from the feed, whether they matched:
``incremental_matches_rescan`` reports it at every run until the next full scan).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from cdc_lake.lake.change_sets import Span, changes_between
from cdc_lake.lake.changes import first_and_last
from cdc_lake.lake.digest import (
    ROW_HASH,
    VERSION,
    add_digests,
    compare_digests,
    empty_digest,
    spark_digest,
    spark_digests,
    spark_row_hash,
)
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.hudi_timeline import CommitInfo, commits_since, completed_commits
from cdc_lake.lake.ordering import key_value, live_rows
from cdc_lake.lake.readers import read_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_lake.lake.schema import LakeSchema

# Every this many commits the state is rescanned in full, whatever the change sets say.
DEFAULT_FULL_SCAN_EVERY = 50
SAMPLE = 10


@dataclass
class TableState:
    """The state of the table at one commit, and what the checks found there."""

    digest: dict[str, Any]  # the JSON described in the module docstring
    duplicated_keys: int = 0
    duplicate_sample: list[int] = field(default_factory=list)
    # None: no comparison this time; else whether the incremental state equalled the rescan.
    incremental_matches_rescan: bool | None = None
    mismatch_detail: dict[str, Any] = field(default_factory=dict)

    @property
    def last_rescan(self) -> dict[str, Any]:
        """The newest full scan behind this state: its commit, whether it could be compared
        with a state kept from the changes, and whether the two matched (a state from a
        full scan with nothing to compare is its own rescan)."""
        return dict(self.digest.get("last_rescan") or {"matched": True, "compared": False})

    @property
    def mode(self) -> str:
        return str(self.digest["mode"])

    @property
    def flagged_rows(self) -> int:
        return int(self.digest["flagged_rows"])

    @property
    def table_rows(self) -> int:
        return int(self.digest["table_rows"])


def _flagged() -> Any:
    return F.coalesce(F.col("is_deleted"), F.lit(False))


def _hashed(schema: LakeSchema) -> list[Any]:
    """An image's key, whether it is flagged as deleted, and its row hash."""
    return [*schema.keys, _flagged().alias("_flagged"), spark_row_hash(schema).alias(ROW_HASH)]


def _with_commit(digest: dict[str, Any], commit: CommitInfo, **fields: Any) -> dict[str, Any]:
    return {**digest, "instant": commit.instant, "completed": commit.completed, **fields}


def full_state(
    spark: SparkSession,
    table: HudiTableConfig,
    commit: CommitInfo,
    schema: LakeSchema,
) -> TableState:
    """The state from one read of the whole snapshot (the cache keeps each row's hash, not its
    JSON columns). ``schema``: the table's."""
    rows = read_table(spark, table.base_path)
    # A column the source added that no commit has written yet: null on every row.
    for c in schema.live:
        if c.name not in rows.columns:
            rows = rows.withColumn(c.name, F.lit(None).cast(c.lake_type))
    keys = schema.keys
    snapshot = rows.select(*keys, "is_deleted", spark_row_hash(schema).alias(ROW_HASH)).cache()
    try:
        rows = snapshot.count()
        dupes = snapshot.groupBy(*keys).count().where("count > 1").select(*keys)
        n_dupes = dupes.count()
        sample = [key_value(r) for r in dupes.limit(SAMPLE).collect()]
        flagged = snapshot.where(_flagged()).count()
        digest = spark_digest(live_rows(snapshot), schema=schema)
    finally:
        snapshot.unpersist()
    state = _with_commit(
        digest,
        commit,
        mode="full",
        commits_since_full=0,
        flagged_rows=flagged,
        table_rows=rows,
        last_rescan={"instant": commit.instant, "compared": False, "matched": True},
    )
    return TableState(state, n_dupes, sample)


def incremental_state(
    spark: SparkSession,
    table: HudiTableConfig,
    previous: dict[str, Any],
    commit: CommitInfo,
    since: Sequence[CommitInfo],
    schema: LakeSchema,
    source: Span | None = None,
) -> TableState:
    """The state at ``commit`` from ``previous`` (the state at an earlier commit) and what the
    commits ``since`` (those after it, up to ``commit``) changed: ``source``, by default their
    change sets or the change feed (``changes_between``). ``schema``: the table's."""
    if source is None:
        source, why = changes_between(
            spark,
            table.base_path,
            since,
            previous["instant"],
            previous["completed"],
            commit,
            schema,
        )
        if source is None:
            raise ValueError(f"{table.base_path}: cannot follow the commits since: {why}")
    changes = source.changes.cache()
    try:
        span = first_and_last(changes, schema.keys)
        before, after = source.rows(span, "before", schema), source.rows(span, "after", schema)
        # Both sides, live or flagged, in one job: their digests and their row counts.
        images = before.select(F.lit(False).alias("_after"), *_hashed(schema)).unionByName(
            after.select(F.lit(True).alias("_after"), *_hashed(schema))
        )
        sides = spark_digests(images, ("_after", "_flagged"), schema=schema)
        empty = empty_digest(schema=schema)

        def side(after: bool, flagged: bool) -> dict[str, Any]:
            return sides.get((after, flagged), empty)

        digest = add_digests(previous, plus=side(True, False), minus=side(False, False))
        flagged_before, flagged_after = side(False, True)["rows"], side(True, True)["rows"]
        rows_before = side(False, False)["rows"] + flagged_before
        rows_after = side(True, False)["rows"] + flagged_after
        # Two after-images of one order in one commit: the commit left it twice in the table.
        keys = schema.keys
        dupes = (
            changes.where(F.col("after").isNotNull())
            .groupBy(*keys, "commit")
            .count()
            .where("count > 1")
            .select(*keys)
            .distinct()
        )
        n_dupes = dupes.count()
        sample = [key_value(r) for r in dupes.limit(SAMPLE).collect()] if n_dupes else []
    finally:
        changes.unpersist()
    state = _with_commit(
        digest,
        commit,
        mode="incremental",
        followed=source.source,
        commits_since_full=int(previous.get("commits_since_full", 0)) + len(since),
        flagged_rows=int(previous["flagged_rows"]) + flagged_after - flagged_before,
        table_rows=int(previous["table_rows"]) + rows_after - rows_before,
        last_rescan=previous.get("last_rescan"),
    )
    return TableState(state, n_dupes, sample)


def usable(previous: dict[str, Any] | None, schema: LakeSchema) -> bool:
    """Whether a reported state can be carried on from (same digest version and columns as
    ``schema``, the table's; names its commit, has the counts). A change of the columns makes
    the next state a full scan."""
    need = ("instant", "completed", "flagged_rows", "table_rows", "digest")
    return (
        isinstance(previous, dict)
        and previous.get("version") == VERSION
        and previous.get("columns") == schema.digest_signature()
        and all(previous.get(k) is not None for k in need)
    )


def evaluate(
    spark: SparkSession,
    table: HudiTableConfig,
    previous: dict[str, Any] | None,
    full_scan: bool = False,
    full_scan_every: int = DEFAULT_FULL_SCAN_EVERY,
    *,
    schema: LakeSchema,
) -> TableState | None:
    """The table's state at its newest commit (None for a table with no commit), the cheapest
    way that is safe; see the module docstring. ``schema``: the table's lake columns, whose
    live ones the digest covers."""
    # One walk of the timeline, newest first, as far back as the previous state's commit.
    timeline = completed_commits(spark, table.base_path, newest_first=True)
    newest = next(timeline, None)
    if newest is None:
        return None
    since = None
    if previous is not None and not usable(previous, schema):
        previous = None  # another digest version or other columns: rescan in full
    if previous is not None:
        since = commits_since(itertools.chain([newest], timeline), previous["instant"])
    if previous is not None and since == [] and not full_scan:
        return TableState({**previous, "mode": "carried"})
    source: Span | None = None
    if previous is not None and since:
        # MERGE_ON_READ has no change sets, and its feed costs a rescan (changes.py).
        source, _ = changes_between(
            spark,
            table.base_path,
            since,
            previous["instant"],
            previous["completed"],
            newest,
            schema,
        )
    can_follow = source is not None
    due = (
        previous is None
        or since is None
        or int(previous.get("commits_since_full", 0)) + len(since) >= full_scan_every
    )
    if can_follow and not full_scan and not due:
        assert previous is not None and since is not None
        return incremental_state(spark, table, previous, newest, since, schema, source)
    state = full_state(spark, table, newest, schema)
    followed: TableState | None = None
    if previous is not None and since == []:
        followed = TableState(previous)  # nothing committed since: the kept state is current
    elif can_follow and since:
        assert previous is not None
        followed = incremental_state(spark, table, previous, newest, since, schema, source)
    if followed is not None:
        diff = compare_digests(state.digest, followed.digest)
        counts_equal = (followed.flagged_rows, followed.table_rows) == (
            state.flagged_rows,
            state.table_rows,
        )
        state.incremental_matches_rescan = diff.equal and counts_equal
        state.digest["last_rescan"] = {
            "instant": newest.instant,
            "compared": True,
            "matched": state.incremental_matches_rescan,
        }
        state.mismatch_detail = {
            "differing_buckets": sorted(diff.details)[:SAMPLE],
            "kept": {"flagged_rows": followed.flagged_rows, "rows": followed.table_rows},
            "rescan": {"flagged_rows": state.flagged_rows, "rows": state.table_rows},
        }
    return state
