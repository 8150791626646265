"""Which source index identifies a captured table's rows, and whether PostgreSQL's logical
replication will carry that key in every change: the rule that ``preflight.check_capturable``
applies to each declared table before anything is published.

A declared key (``CapturedTable.key``) is taken when the source holds it unique:

- its **primary key**, on the same columns (in any order); or
- a **unique index** on the same columns that PostgreSQL accepts as a replica identity: not
  partial, no expressions, not deferrable, every column ``NOT NULL``. A table without a
  primary key is captured this way (Debezium is told the key, ``message.key.columns``, so its
  topic is keyed by it and incremental snapshots can chunk it).

Then every ``UPDATE`` and ``DELETE`` must carry the key's old values, or the lake could not
find the row it replaces (and PostgreSQL refuses the writes of a published table that has no
replica identity at all):

- declared ``replica_identity="full"``: the source asset sets ``REPLICA IDENTITY FULL``, which
  carries the whole old row;
- declared ``"default"``, the table is left as it is, so its replica identity must already
  carry the key: ``FULL``, ``DEFAULT`` when the key is the primary key, or ``USING INDEX`` on
  the key's own index.

Anything else is refused with the table, the cause and the statement that fixes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg2.extensions import connection as PgConnection

from cdc_lake.source.captured import CapturedTable

# pg_class.relreplident
IDENTITY_NAMES = {"d": "DEFAULT", "n": "NOTHING", "f": "FULL", "i": "USING INDEX"}


@dataclass(frozen=True)
class UniqueIndex:
    """One unique index of the source table, as the catalog describes it."""

    name: str
    columns: tuple[str, ...]  # its key columns, in index order (INCLUDE columns left out)
    primary: bool = False
    replica_identity: bool = False  # the index that REPLICA IDENTITY USING INDEX names
    plain: bool = True  # not partial, no expressions, not deferrable
    not_null: bool = True  # every column NOT NULL

    @property
    def identifies(self) -> bool:
        """PostgreSQL would take it as a replica identity, so each row has one value of it."""
        return self.primary or (self.plain and self.not_null)


def _cols(columns: Sequence[str]) -> str:
    return f"({', '.join(columns)})"


def refusal(table: CapturedTable, indexes: Sequence[UniqueIndex], identity: str) -> str | None:
    """Why ``table`` cannot be captured as declared, given its unique ``indexes`` and its
    current replica identity (``pg_class.relreplident``); ``None`` when it can."""
    declared = table.keys
    primary = next((i for i in indexes if i.primary), None)
    same = [i for i in indexes if sorted(i.columns) == sorted(declared)]
    key = next((i for i in same if i.primary), None) or next(
        (i for i in same if i.identifies), None
    )
    where = "cdc_lake/source/captured.py"
    if key is None:
        if same:  # a unique index on the key, which PostgreSQL would not take as an identity
            index = same[0]
            why = (
                "may hold NULL"
                if not index.not_null
                else "is partial, on expressions or deferrable"
            )
            fix = (
                f"ALTER TABLE {table.source} "
                + ", ".join(f"ALTER COLUMN {c} SET NOT NULL" for c in declared)
                if not index.not_null
                else f"CREATE UNIQUE INDEX ON {table.source} {_cols(declared)} (a plain one)"
            )
            return (
                f"{table.source}: its unique index {index.name} on {_cols(declared)} {why}, so "
                "it does not identify a row and cannot be the lake's key. Nothing was "
                f"published. Fix: {fix}; or make {_cols(declared)} the primary key."
            )
        if primary is None:
            return (
                f"{table.source} has no primary key, nor a unique index on its declared key "
                f"{_cols(declared)}, so it cannot be captured: published, every UPDATE and "
                "DELETE of it would fail in PostgreSQL (no replica identity), and Debezium "
                "skips it in snapshots. Nothing was published. Fix: add one on its declared "
                f"key, ALTER TABLE {table.source} ADD PRIMARY KEY {_cols(declared)}; or, if "
                "another unique key identifies a row, declare that key (a unique index on "
                f"NOT NULL columns) in {where}."
            )
        shown = primary.columns[0] if len(primary.columns) == 1 else primary.columns
        return (
            f"{table.source} is declared with key {_cols(declared)} but its primary key is "
            f"{_cols(primary.columns)}, and no unique index is on {_cols(declared)}: the lake "
            "keeps one row per value of its key, so the source must hold it unique. Nothing "
            f"was published. Fix: declare key={shown!r} in {where}, or add a unique index on "
            f"{_cols(declared)} (NOT NULL columns)."
        )
    if table.replica_identity == "full" or identity == "f":
        return None  # FULL (set by the source asset, or already) carries the whole old row
    if identity == "d" and key.primary:
        return None  # DEFAULT carries the primary key
    if identity == "i" and key.replica_identity:
        return None
    carried = {
        "d": f"its primary key {_cols(primary.columns)}" if primary else "nothing",
        "n": "nothing",
        "i": "another index's columns",
    }.get(identity, "nothing")
    return (
        f"{table.source} is declared replica_identity='default' with key {_cols(declared)}, "
        f"but its REPLICA IDENTITY {IDENTITY_NAMES.get(identity, identity)} carries {carried} "
        "in an UPDATE or DELETE, not that key: the lake could not find the row a change "
        "replaces. Nothing was published. Fix: ALTER TABLE "
        f"{table.source} REPLICA IDENTITY USING INDEX {key.name.rpartition('.')[2]}; or "
        f"declare replica_identity='full' in {where} (the source asset then sets FULL)."
    )


def unique_indexes(conn: PgConnection, oid: int) -> list[UniqueIndex]:
    """The table's unique indexes (``oid``: its ``pg_class`` row), from the catalog."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT i.indexrelid::regclass::text, i.indisprimary, i.indisreplident,"
            " i.indpred IS NULL AND i.indexprs IS NULL AND i.indimmediate,"
            " ARRAY(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY AS k(n, o)"
            "   JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n"
            "   WHERE k.o <= i.indnkeyatts ORDER BY k.o),"
            " coalesce((SELECT bool_and(a.attnotnull) FROM unnest(i.indkey)"
            "   WITH ORDINALITY AS k(n, o) JOIN pg_attribute a ON a.attrelid = i.indrelid"
            "   AND a.attnum = k.n WHERE k.o <= i.indnkeyatts), false)"
            " FROM pg_index i WHERE i.indrelid = %s AND i.indisunique ORDER BY 1",
            (oid,),
        )
        rows = cur.fetchall()
    conn.commit()
    return [
        UniqueIndex(name=r[0], columns=tuple(r[4]), primary=r[1], replica_identity=r[2],
                    plain=r[3], not_null=r[5])  # fmt: skip
        for r in rows
    ]
