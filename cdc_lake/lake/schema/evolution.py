"""The lake's schema after the source's columns change (``evolve``), and how the lake's columns
stand against the source's now (``compare``, for the ``schema_matches_source`` check).

Evolution (``evolve``), following what Hudi's Spark writer takes
    - A column added at the source is added to the lake, nullable: rows written before read as
      null. The lake's column order is kept and new columns go at the end.
    - A column added with a non-volatile default: PostgreSQL reads every row stored before
      as that value (the catalog's ``attmissingval``) and sends no change for them. The lake
      records it as the column's ``missing_value``: a raw line without the field (written
      before the column existed) carries it, and the commit that takes the column gives it to
      every live row already in the lake (``to_backfill``). A volatile default (``random()``,
      ``clock_timestamp()``) makes PostgreSQL rewrite the table, again without change events:
      nothing in the catalog tells, and ``matches_source`` fails on those rows until they
      change or the table is snapshotted again (``cdc-lake source resnapshot``).
    - Widening an integer (``smallint`` to ``integer`` to ``bigint``) goes through: the lake
      holds every integer as ``bigint``.
    - The lake holds every float as ``double``; ``real`` to ``double precision`` stops, like any
      other change between types of one lake type (text to jsonb): PostgreSQL converts each
      stored value exactly (real's 1.1 becomes 1.100000023841858), but the raw files hold
      real's text ("1.1"), which read as a double is another value, and a line does not say
      which type wrote it; a replay would then change the rows.
    - A column dropped at the source stays in the lake, null from then on (a lake keeps
      history); the ``schema_matches_source`` check names it with WARN severity.
    - Anything else (a type narrowed or changed, a key column changed, a column renamed: the
      catalog's ``attnum`` stays with a renamed column) raises ``SchemaChangeError`` before
      anything is written: it names the table, the column, the old and new types, and the way
      forward. Nothing is half-committed and no value is coerced. Hudi's own writer would not
      stop all of these: measured on 1.1.1, it turns an ``int`` column into ``string`` when a
      batch sends text, and a ``bigint`` key into ``double`` (so every key is written again as
      "2.0": duplicates), without a word. It rejects only what it cannot convert (boolean to
      int) and a batch that lacks a column, so the batch always carries every lake column, null
      where the source has none.
    The evolved columns and a schema version (one more at each change) go into the Hudi commit's
    extra metadata (``SCHEMA_KEY``), atomically with the data, as the checkpoint does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from cdc_lake.lake.schema.columns import (
    FLOAT_KINDS,
    LakeColumn,
    SchemaChangeError,
    SourceColumn,
    lake_column,
)
from cdc_lake.lake.schema.model import LakeSchema
from cdc_lake.source.captured import key_columns

# A kind changed into another of the same lake type where every value carries over as it is:
# numeric's exact text (decimal.handling.mode=string) is the text PostgreSQL casts it to.
KIND_CHANGES: set[tuple[str, str]] = {("decimal", "text")}

# A lake type changed into another: only these widenings (Hudi promotes the stored values). The
# integer widenings need none: every integer is a bigint in the lake.
WIDENINGS: set[tuple[str, str]] = {("int", "bigint")}


def initial(table: str, key: str | Sequence[str], source: Sequence[SourceColumn]) -> LakeSchema:
    """The schema of a table about to be created from these source columns."""
    keys = key_columns(key)
    for k in keys:
        if not any(c.name == k for c in source):
            raise SchemaChangeError(f"{table}: the source has no key column {k!r}")
        key_kind = next(c for c in source if c.name == k).kind
        if key_kind in FLOAT_KINDS:
            raise SchemaChangeError(
                f"{table}: the key column {k!r} is a float, which cdc-lake does not take as a "
                "key (a float's equality is not its text's). Way forward: key the table by an "
                "integer or text column."
            )
    return LakeSchema(table, keys, tuple(lake_column(c, table) for c in source))


def _kind_of_lake_type(spark_type: str) -> str:
    """A lake column with no recorded kind (a table written before the schema was recorded)."""
    by_type = {"int": "int", "bigint": "int", "boolean": "bool", "date": "date",
               "timestamp": "timestamptz", "string": "text", "double": "float8"}  # fmt: skip
    return by_type.get(spark_type, "text")


def from_lake_types(
    table: str, key: str | Sequence[str], lake_types: Mapping[str, str]
) -> LakeSchema:
    """The schema of a table that recorded none (written before schemas were recorded), from
    its columns' Spark types; their source types are unknown, so taken as the lake's."""
    return LakeSchema(
        table,
        key_columns(key),
        tuple(LakeColumn(n, _kind_of_lake_type(t), t) for n, t in lake_types.items()),
    )


def evolve(
    table: str,
    key: str | Sequence[str],
    source: Sequence[SourceColumn],
    lake_types: Mapping[str, str] | None,
    recorded: LakeSchema | None = None,
) -> LakeSchema:
    """The lake's schema after taking the source's columns (see the module docstring).

    ``lake_types``: the existing lake table's data columns (lake order) and their Spark types,
    None for a table not created yet. ``recorded``: the schema the newest commit recorded, if
    any, for the kinds of dropped columns and the version. Raises ``SchemaChangeError``.
    """
    if lake_types is None:
        return initial(table, key, source)
    keys = key_columns(key)
    if recorded is not None and recorded.keys != keys:
        # Hudi's record key is the key's columns in order: another key, or the same columns in
        # another order, would make every row a new record beside its old one.
        raise SchemaChangeError(
            f"{table}: the declared key ({', '.join(keys)}) is not the one the lake table was "
            f"written with ({', '.join(recorded.keys)}). Nothing was committed. Way forward: "
            "declare the key as it was (cdc_lake/source/captured.py), or replay the raw files "
            "into a new table (LakeResource(lake_prefix=...) and `cdc-lake lake replay "
            "--from-offset 0`)."
        )
    for gone in (k for k in keys if not any(c.name == k for c in source)):
        raise SchemaChangeError(
            f"{table}: the key column {gone!r} is gone from the source. Nothing was committed. "
            "Way forward: restore the column, or replay the raw files into a new table "
            "(LakeResource(lake_prefix=...) and `cdc-lake lake replay --from-offset 0`)."
        )
    by_name = {c.name: c for c in source}
    known = {c.name: c for c in recorded.columns} if recorded else {}
    # A rename keeps the column's attnum: a new name at a live column's position is one.
    renamed_from = {c.position: c.name for c in known.values() if c.position and not c.dropped}
    for c in source:
        old = renamed_from.get(c.position) if c.position else None
        if old and old != c.name and old not in by_name:
            raise SchemaChangeError(
                f"{table}: column {old!r} was renamed to {c.name!r}, which the lake cannot "
                "take: its rows would keep their values under the old name and the new one "
                "would be null until each row changes. Nothing was committed and the table is "
                f"unchanged. Way forward: rename it back; or add {c.name!r} as a new column, "
                f"copy the values over (UPDATE ... SET {c.name} = {old}) and drop {old!r}; or "
                "replay the raw files into a new table (LakeResource(lake_prefix=...) and "
                "`cdc-lake lake replay --from-offset 0`)."
            )
    columns: list[LakeColumn] = []
    for name, lake_type in lake_types.items():
        src = by_name.get(name)
        if src is None:
            kind = known[name].kind if name in known else _kind_of_lake_type(lake_type)
            columns.append(LakeColumn(name, kind, None))
            continue
        new = lake_column(src, table)
        old_kind = known[name].kind if name in known else None
        same_text = (old_kind, new.kind) in KIND_CHANGES
        if new.lake_type == lake_type and old_kind not in (None, new.kind) and not same_text:
            raise SchemaChangeError(
                f"{table}: column {name!r} changed type from {known[name].source_type} to "
                f"{src.pg_type}, which the lake cannot take: both are {lake_type} in the lake, "
                "but the values may not carry over exactly (the source converted every stored "
                "value, and the raw files hold the old type's values, which a replay would read "
                "as the new type). Nothing was committed and "
                "the table is unchanged. Way forward: change the column back at the source, or "
                "add the new type as a new column."
            )
        if new.lake_type != lake_type:
            widening = (lake_type, new.lake_type) in WIDENINGS
            if not widening or name in keys:
                old = known[name].source_type if name in known else None
                raise SchemaChangeError(
                    f"{table}: column {name!r} changed type from {old or lake_type} "
                    f"(lake: {lake_type}) to {src.pg_type} (lake: {new.lake_type}), which the "
                    "lake cannot take"
                    + (" on its key column" if name in keys else "")
                    + ". Nothing was committed and the table is unchanged. Way forward: change "
                    "the column back at the source, or add the new type as a new column; or "
                    "replay the raw files into a new table (LakeResource(lake_prefix=...) and "
                    "`cdc-lake lake replay --from-offset 0`)."
                )
        # The missing value is the source's when the lake takes the column (again, after a
        # drop); after that the recorded one, which a table rewrite at the source clears.
        readded = name in known and _readded(known[name], src)
        kept = known[name].missing_value if name in known else None
        columns.append(replace(new, missing_value=new.missing_value if readded else kept))
    columns += [lake_column(c, table) for c in source if c.name not in lake_types]
    evolved = LakeSchema(table, keys, tuple(columns))
    if recorded is not None:
        changed = recorded.columns != evolved.columns
    else:
        changed = any(c.dropped for c in columns) or [
            (c.name, c.lake_type) for c in columns
        ] != list(lake_types.items())
    version = (recorded.version if recorded else 1) + int(changed)
    return LakeSchema(table, keys, evolved.columns, version)


def _readded(recorded: LakeColumn, now: SourceColumn | LakeColumn) -> bool:
    """Dropped and added again at the source: the lake saw the drop, or the column's attnum
    moved (PostgreSQL never reuses one)."""
    known = recorded.position is not None and now.position is not None
    return recorded.dropped or (known and recorded.position != now.position)


def to_backfill(
    lake_types: Mapping[str, str] | None, recorded: LakeSchema | None, evolved: LakeSchema
) -> tuple[LakeColumn, ...]:
    """The columns whose stored rows change without a change event, so every live row the lake
    holds gets the column's missing value (null without one) in the commit that takes them:
    a column added with a missing value (the source's rows stored before read it), and a
    column added again after a drop (its old values are gone at the source)."""
    if lake_types is None:
        return ()
    before = {c.name: c for c in recorded.columns} if recorded else {}
    return tuple(
        c
        for c in evolved.live
        if (c.missing_value is not None and c.name not in lake_types)
        or (c.name in before and _readded(before[c.name], c))
    )


def not_in_table(
    lake_types: Mapping[str, str] | None, evolved: LakeSchema
) -> tuple[LakeColumn, ...]:
    """The live columns an existing table does not have yet: added at the source since its last
    commit (none for a table not written yet)."""
    if lake_types is None:
        return ()
    return tuple(c for c in evolved.live if c.name not in lake_types)


@dataclass(frozen=True)
class SchemaDiff:
    """How the lake's columns stand against the source's now."""

    missing: tuple[str, ...]  # at the source, not (yet) in the lake
    changed: tuple[str, ...]  # in both, but the source's type is not the one the lake took
    dropped: tuple[str, ...]  # kept in the lake, gone from the source

    @property
    def equal(self) -> bool:
        return not (self.missing or self.changed or self.dropped)


def compare(source: Sequence[SourceColumn], lake: LakeSchema) -> SchemaDiff:
    names = {c.name for c in lake.columns}
    taken = {c.name: c.source_type for c in lake.columns if not c.dropped}
    src = {c.name: c.pg_type for c in source}
    return SchemaDiff(
        missing=tuple(c.name for c in source if c.name not in names),
        changed=tuple(
            f"{n}: {taken[n]} -> {t}" for n, t in src.items() if n in taken and taken[n] != t
        ),
        dropped=tuple(c.name for c in lake.columns if c.name not in src),
    )


def describe_change(old: LakeSchema | None, new: LakeSchema) -> str | None:
    """What changed from ``old`` to ``new``, in a line; None when nothing did."""
    if old is None or old.columns == new.columns:
        return None
    before = {c.name: c for c in old.columns}
    parts = []
    for c in new.columns:
        was = before.get(c.name)
        if was is None:
            parts.append(f"added {c.name} ({c.source_type})")
        elif c.dropped and not was.dropped:
            parts.append(f"{c.name} dropped at the source, kept")
        elif was.dropped and not c.dropped:
            parts.append(f"{c.name} back at the source ({c.source_type})")
        elif was.source_type != c.source_type:
            parts.append(f"{c.name} {was.source_type} -> {c.source_type}")
    return f"schema v{old.version} -> v{new.version}: " + "; ".join(parts or ["columns recorded"])
