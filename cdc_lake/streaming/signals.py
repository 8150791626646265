"""Ad-hoc incremental snapshots of a captured table (any that
``cdc_lake/source/captured.py`` declares), requested through Debezium's signal table.

``request_snapshot`` inserts one ``execute-snapshot`` signal (type ``incremental``) into
``datalake.debezium_signal`` and returns its id. Debezium sees the insert in the replication
stream (the table is published, see ``sql/003_debezium.sql``), reads the chosen rows of the table
in chunks between two watermarks it writes to the same table, and emits each row once more on the
table's topic, as it is now. Rows are chosen by their key's values (a table whose key is one
column), or all of them (any table).

What the re-sent events look like (Debezium 3.6.3, pgoutput, PostgreSQL 15; covered by
``cdc_lake_tests/ingestion/test_resnapshot.py``):

- ``__op`` is ``r``, the row is the table's current content, ``__deleted`` is "false";
- ``__source_ts_ms`` is the time the connector emitted the event (its own clock, when it reads
  the chunk's closing watermark back from the stream), not a commit time;
- ``__lsn`` is null: an incremental-snapshot read has no position in the WAL.

So by the lake's ordering, (``__source_ts_ms``, ``__lsn``) with a null LSN lowest, a re-sent
row sorts after every change of that key that Debezium had already streamed, and replaces a
stale or missing lake row. Two limits follow from the timestamp being the emission time: a
change committed while the connector was still behind the watermark (within its streaming lag)
can sort before the re-sent row although it is newer, and stays shadowed until the key's next
change; and on a separate Connect host the two clocks must agree to within that margin.

A snapshot only re-sends rows that exist: a row deleted from the source but still in the lake
is not repaired by it (``cdc-lake lake reconcile`` removes it).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence

from psycopg2.extensions import connection as PgConnection

from cdc_lake.source.captured import CapturedTable
from cdc_lake.source.database import PUBLICATION

SIGNAL_TABLE = "datalake.debezium_signal"
SIGNAL_DATA_MAX = 2048  # the width of debezium_signal.data

# A key value that is text goes into the filter as an SQL string literal. The filter is raw SQL
# that Debezium appends to its chunk query, with no parameters: so only these characters pass,
# none of which can end the literal or start a comment. Anything else is refused, not escaped.
SAFE_TEXT_KEY = re.compile(r"[A-Za-z0-9_.\- ]+")
# A key column named as declared goes bare into the filter; any other name is double-quoted.
PLAIN_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")

KeyValue = int | str


class SignalNotDeliverable(RuntimeError):
    pass


def key_column(table: CapturedTable) -> str:
    """The one column of ``table``'s key, by which rows can be picked; ValueError naming the
    table for a composite key (its rows are snapshotted all together)."""
    if len(table.keys) != 1:
        raise ValueError(
            f"{table.source}'s key is composite ({', '.join(table.keys)}): its rows cannot be "
            "picked by key; snapshot all of them (--all)"
        )
    return table.keys[0]


def key_literal(value: object) -> str:
    """``value`` as the filter's SQL writes it: an integer bare, a text quoted. ValueError
    naming the value for any other type, or a text outside ``SAFE_TEXT_KEY``."""
    # bool is an int subclass: True is no key.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        if not SAFE_TEXT_KEY.fullmatch(value):
            raise ValueError(
                f"key value {value!r} is refused: Debezium's SQL filter takes it as it is, so "
                "only letters, digits, space, '_', '.' and '-' may be in it"
            )
        return f"'{value}'"
    raise ValueError(f"key value {value!r} is neither an integer nor a text")


def execute_snapshot_data(
    keys: Sequence[KeyValue] | None, table: CapturedTable
) -> dict[str, object]:
    """The ``data`` of an incremental ``execute-snapshot`` signal of ``table``: the rows whose
    key is one of ``keys``, or all of them (None).

    The values become an SQL ``IN`` list that Debezium appends to its chunk query (integers
    bare, texts quoted: ``key_literal``); they are deduplicated and sorted so the same request
    gives the same signal. Picking rows needs a one-column key (``key_column``)."""
    data: dict[str, object] = {"data-collections": [table.source], "type": "incremental"}
    if keys is None:
        return data
    column = key_column(table)
    literals = {key_literal(v): v for v in keys}
    if not literals:
        raise ValueError(f"no key values for {table.source}: pass at least one, or None for all")
    # Integers first, in numeric order, then texts in theirs.
    ordered = sorted(literals, key=lambda s: (isinstance(literals[s], str), literals[s]))
    name = column if PLAIN_IDENTIFIER.fullmatch(column) else '"' + column.replace('"', '""') + '"'
    data["additional-conditions"] = [
        {"data-collection": table.source, "filter": f"{name} IN ({', '.join(ordered)})"}
    ]
    return data


def request_snapshot(
    conn: PgConnection,
    keys: Sequence[KeyValue] | None,
    publication: str = PUBLICATION,
    *,
    table: CapturedTable,
) -> str:
    """Insert an incremental-snapshot signal of ``table`` for the rows with these key values
    (None: all) and commit; returns the signal's id. Fails, inserting nothing, if the
    publication does not carry the signal table, since Debezium would then never see the
    signal."""
    data = json.dumps(execute_snapshot_data(keys, table), separators=(",", ":"))
    if len(data) > SIGNAL_DATA_MAX:
        raise ValueError(
            f"the signal for {len(keys or [])} keys of {table.source} is {len(data)} characters, "
            f"over the {SIGNAL_DATA_MAX} its table holds: request fewer keys at a time, or all"
        )
    signal_schema, signal_table = SIGNAL_TABLE.split(".")
    with conn.cursor() as cur:
        cur.execute(
            "SELECT 1 FROM pg_publication_tables"
            " WHERE pubname = %s AND schemaname = %s AND tablename = %s",
            (publication, signal_schema, signal_table),
        )
        if cur.fetchone() is None:
            conn.rollback()
            raise SignalNotDeliverable(
                f"publication {publication!r} does not publish {SIGNAL_TABLE}, so Debezium "
                "would never see the signal. Fix: materialise the source outbox asset "
                "(sql/003_debezium.sql adds it)."
            )
        signal_id = str(uuid.uuid4())
        cur.execute(
            f"INSERT INTO {SIGNAL_TABLE} (id, type, data) VALUES (%s, 'execute-snapshot', %s)",
            (signal_id, data),
        )
    conn.commit()
    return signal_id
