"""Column policies (``CapturedTable.exclude`` and ``hashed``): the source's columns as the lake
takes them, and a policy change, which stops a refresh.

What the source connector does (``cdc_lake/streaming/connect_config.py``): an excluded column is
left out of every change event (Debezium's ``column.exclude.list``), and a hashed one carries
the hex of a salted SHA-256 of its value (the ``HashColumns`` transform in ``connectors/``).
Neither plain value enters Kafka, the raw files or the lake.

What follows here:
    - the lake has no excluded column: ``captured_columns`` drops it from the source's;
    - a policy on a field of a jsonb column (``<column>.<field>``, a field at the top of its
      object) changes the column's JSON text: the field left out, or its string value hashed.
      The schema records those fields (``LakeSchema.excluded``, ``hashed_fields``), and the
      digest applies the same to the source's value in PostgreSQL;
    - a hashed column is of kind ``hashed`` (a text column: only text can be hashed), which the
      digest hashes in PostgreSQL with the same salt (``cdc_lake/lake/digest.py``), so
      ``matches_source`` still compares every value;
    - a policy changed after the lake table was written (``check_policy``) stops the refresh
      before anything is written, naming the column: the lake holds values written under the
      old policy (plain values of a column now hashed or excluded, hashes of a column no longer
      hashed, no values for a column no longer excluded), which no later change event fixes
      for the rows that do not change. The way forward is a new lake table
      (docs/column-policies.md);
    - a raw line written before a policy reached the connector stops the refresh too, naming
      the line: an excluded column's field (``raw_lines.unknown_fields_message``), or a hashed
      column's value that is not a hash (``raw_lines.unhashed_message``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from cdc_lake.lake.schema.columns import SchemaChangeError, SourceColumn
from cdc_lake.lake.schema.evolution import initial
from cdc_lake.lake.schema.model import LakeSchema
from cdc_lake.lake.schema.source import columns_from_catalog
from cdc_lake.source.captured import CapturedTable, json_field

WAY_FORWARD = (
    "Nothing was committed. Way forward: declare the policy as it was "
    "(cdc_lake/source/captured.py), or write a new lake table under the new one: "
    "LakeResource(lake_prefix=...), then `cdc-lake source resnapshot --all --table {table}` "
    "(docs/column-policies.md)."
)


def captured_columns(
    table: CapturedTable, source: Sequence[SourceColumn], *, strict: bool = True
) -> list[SourceColumn]:
    """The source's columns as the lake takes them: excluded ones left out, hashed ones marked.
    ``strict``: a policy naming a column the source lacks is an error (a typo would leave a
    column unhashed); off where the columns are the lake's own, which lack the excluded."""
    names = {c.name: c for c in source}
    if strict:
        for name in (*table.exclude, *table.hashed):
            column = (json_field(name) or (name,))[0]
            if column not in names:
                raise SchemaChangeError(
                    f"{table.source}.{name}: a column policy names it, but the source has no "
                    f"column {column}. Nothing was committed. Fix the declaration "
                    "(cdc_lake/source/captured.py)."
                )
    fields = table.json_columns
    out: list[SourceColumn] = []
    for c in source:
        if c.name in fields and c.base_type != "jsonb":
            raise SchemaChangeError(
                f"{table.source}.{c.name}: a policy names a field of it, but it is {c.pg_type}: "
                "only jsonb columns can have field policies (json keeps its text as written). "
                "Nothing was committed. Fix the declaration (cdc_lake/source/captured.py)."
            )
        if c.name in fields and c.missing_value is not None:
            raise SchemaChangeError(
                f"{table.source}.{c.name}: a policy names a field of it, but it was added with "
                "a default that rows stored before read as, which the connector never sees. "
                f"Nothing was committed. Way forward: {_rewrite(table.source, c.name)}"
            )
        if c.name in table.exclude:
            continue
        if c.name in table.hashed:
            if c.kind not in ("text", "hashed"):
                raise SchemaChangeError(
                    f"{table.source}.{c.name}: declared hashed, but it is {c.pg_type}: only text "
                    "columns (text, varchar, uuid) can be hashed. Nothing was committed. Fix the "
                    "declaration (cdc_lake/source/captured.py), or exclude the column."
                )
            if c.missing_value is not None:
                # Rows stored before the column was added read as its default, which no change
                # event carries hashed: the lake would fill in the plain default.
                raise SchemaChangeError(
                    f"{table.source}.{c.name}: declared hashed, but it was added with a default "
                    "that rows stored before read as, which the connector never sees. Nothing "
                    f"was committed. Way forward: {_rewrite(table.source, c.name)}"
                )
            c = replace(c, hashed=True)
        out.append(c)
    return out


def check_policy(
    table: CapturedTable, recorded: LakeSchema | None, source: Sequence[str] | None = None
) -> None:
    """Raise ``SchemaChangeError`` naming the columns whose policy differs from the one the lake
    table ``recorded`` was written under; nothing for a new table. ``source``: the source's
    column names, when known: a column it no longer has is a drop, not a policy change."""
    if recorded is None:
        return
    gone = set() if source is None else {c.name for c in recorded.columns} - set(source)
    live = {c.name: c for c in recorded.live if c.name not in gone}
    changes: list[str] = []
    # Fields of jsonb columns: the lake's JSON text holds a field or its hash as written.
    for policy, declared, written in (
        ("excluded", table.exclude, recorded.excluded),
        ("hashed", table.hashed, recorded.hashed_fields),
    ):
        now, was = _fields_of(declared, live), _fields_of(written, live)
        held, kept = (
            ("its plain values", "its hashes") if policy == "hashed"
            else ("its values", "none of its values")
        )  # fmt: skip
        changes += [f"{n} is now {policy}, but the lake holds {held}" for n in sorted(now - was)]
        changes += [f"{n} is no longer {policy}, but the lake holds {kept}"
                    for n in sorted(was - now)]  # fmt: skip
    for name in (n for n in table.exclude if not json_field(n)):
        if name in live:
            changes.append(f"{name} is now excluded, but the lake holds its values")
    for name in (n for n in recorded.excluded if not json_field(n)):
        if name not in table.exclude and (source is None or name in source):
            changes.append(f"{name} is no longer excluded, but the lake has none of its values")
    for name, column in live.items():
        if column.kind == "hashed" and name not in table.hashed:
            changes.append(f"{name} is no longer hashed, but the lake holds its hashes")
        if column.kind != "hashed" and name in table.hashed:
            changes.append(f"{name} is now hashed, but the lake holds its plain values")
    if changes:
        raise SchemaChangeError(
            f"{table.source}: a column policy changed: {'; '.join(changes)}. "
            + WAY_FORWARD.format(table=table.source)
        )


def _rewrite(table: str, column: str) -> str:
    """How to get past a policied column added with a default: every row's value through the
    connector, then the table rewritten, which is what clears PostgreSQL's missing value (an
    UPDATE alone does not)."""
    return (
        f"UPDATE {table} SET {column} = {column} (every row then sends its value through the "
        f"connector, under the policy), then VACUUM FULL {table} (the rewrite makes PostgreSQL "
        "forget the default it kept for the rows stored before; it locks the table while it "
        "runs), then refresh."
    )


def _fields_of(names: Sequence[str], columns: Sequence[str] | dict[str, Any]) -> set[str]:
    """The field policies among ``names`` whose jsonb column is one of ``columns``."""
    return {n for n in names if (f := json_field(n)) is not None and f[0] in columns}


def catalog_columns(conn: Any, table: CapturedTable) -> list[SourceColumn]:
    """The source's columns, from its catalog, as the lake takes them (``captured_columns``)."""
    return captured_columns(table, columns_from_catalog(conn, table.source))


def captured_schema(table: CapturedTable, columns: Sequence[SourceColumn]) -> LakeSchema:
    """The lake schema of a new table of ``table`` over ``columns`` (``captured_columns``'),
    with its field policies: what the digest of its source rows needs."""
    schema = initial(table.source, table.key, columns)
    return replace(schema, excluded=table.exclude, hashed_fields=table.hashed_fields)


def catalog_schema(conn: Any, table: CapturedTable) -> LakeSchema:
    """``captured_schema`` over the source's catalog columns."""
    return captured_schema(table, catalog_columns(conn, table))
