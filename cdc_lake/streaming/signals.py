"""Ad-hoc incremental snapshots of a captured table (the outbox, or any other that
``cdc_lake/source/captured.py`` declares), requested through Debezium's signal table.

``request_snapshot`` inserts one ``execute-snapshot`` signal (type ``incremental``) into
``datalake.debezium_signal`` and returns its id. Debezium sees the insert in the replication
stream (the table is published, see ``sql/003_debezium.sql``), reads the chosen outbox rows in
chunks between two watermarks it writes to the same table, and emits each row once more on the
outbox topic, as it is now.

What the re-sent events look like (Debezium 3.6.3, pgoutput, PostgreSQL 15; covered by
``cdc_lake_tests/ingestion/test_resnapshot.py``):

- ``__op`` is ``r``, the row is the outbox's current content, ``__deleted`` is "false";
- ``__source_ts_ms`` is the time the connector emitted the event (its own clock, when it reads
  the chunk's closing watermark back from the stream), not a commit time;
- ``__lsn`` is null: an incremental-snapshot read has no position in the WAL.

So by the lake's ordering, (``__source_ts_ms``, ``__lsn``) with a null LSN lowest, a re-sent
row sorts after every change of that order that Debezium had already streamed, and replaces a
stale or missing lake row. Two limits follow from the timestamp being the emission time: a
change committed while the connector was still behind the watermark (within its streaming lag)
can sort before the re-sent row although it is newer, and stays shadowed until the order's next
change; and on a separate Connect host the two clocks must agree to within that margin.

A snapshot only re-sends rows that exist: an order deleted from the outbox but still in the lake
is not repaired by it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

from psycopg2.extensions import connection as PgConnection

from cdc_lake.source.captured import OUTBOX, CapturedTable
from cdc_lake.source.database import PUBLICATION

SIGNAL_TABLE = "datalake.debezium_signal"
SIGNAL_DATA_MAX = 2048  # the width of debezium_signal.data


class SignalNotDeliverable(RuntimeError):
    pass


def execute_snapshot_data(
    order_ids: Sequence[int] | None, table: CapturedTable = OUTBOX
) -> dict[str, object]:
    """The ``data`` of an incremental ``execute-snapshot`` signal for these orders (None: all;
    for a table other than the outbox, only all).

    The ids become an SQL ``IN`` list that Debezium appends to its chunk query, so each must be
    an integer; they are sorted and deduplicated so the same request gives the same signal."""
    data: dict[str, object] = {"data-collections": [table.source], "type": "incremental"}
    if order_ids is None:
        return data
    if table != OUTBOX:
        raise ValueError(f"only the outbox's orders can be picked; {table.source}: all rows")
    ids = sorted({_order_id(i) for i in order_ids})
    if not ids:
        raise ValueError("no order ids: pass at least one, or None for every order")
    data["additional-conditions"] = [
        {
            "data-collection": OUTBOX.source,
            "filter": f"{OUTBOX.key} IN ({', '.join(str(i) for i in ids)})",
        }
    ]
    return data


def _order_id(value: object) -> int:
    # bool is an int subclass, and a str could smuggle SQL into the filter.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"order id {value!r} is not an integer")
    return value


def request_snapshot(
    conn: PgConnection,
    order_ids: Sequence[int] | None,
    publication: str = PUBLICATION,
    table: CapturedTable = OUTBOX,
) -> str:
    """Insert an incremental-snapshot signal of ``table`` for these orders (None: all) and
    commit; returns the signal's id. Fails, inserting nothing, if the publication does not
    carry the signal table, since Debezium would then never see the signal."""
    data = json.dumps(execute_snapshot_data(order_ids, table), separators=(",", ":"))
    if len(data) > SIGNAL_DATA_MAX:
        raise ValueError(
            f"the signal for {len(order_ids or [])} orders is {len(data)} characters, over the "
            f"{SIGNAL_DATA_MAX} its table holds: request fewer orders at a time, or all of them"
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
