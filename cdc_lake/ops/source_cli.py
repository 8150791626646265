"""``cdc-lake source prepare | resnapshot``: the source database.

``prepare`` applies ``sql/`` and loads the sample data once. ``resnapshot`` asks Debezium to send
rows of a captured table again, as they are now (an incremental snapshot,
``cdc_lake/streaming/signals.py``): every row (``--all``), or those whose key is one of
``--keys`` (``--orders``, its older name). Picking rows by key needs a table whose declared key
is one column; a composite-key table takes ``--all``. Every value must be a key the table holds
(checked before anything is requested), and only letters, digits, space and ``_ . -`` pass,
since the values reach Debezium's chunk query as SQL text.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from cdc_lake.ops.args import add_table_option, connect, number, stack_settings
from cdc_lake.source.captured import CapturedTable, captured
from cdc_lake.streaming.signals import KeyValue, key_column, key_literal, request_snapshot

# The key column types whose values the signal's filter writes as bare integers.
INTEGER_TYPES = frozenset({"smallint", "integer", "bigint"})


def _key_values(text: str) -> list[str]:
    """An argparse type: comma-separated key values, each one the signal's filter accepts."""
    values = [part.strip() for part in text.split(",") if part.strip()]
    if not values:
        raise argparse.ArgumentTypeError("no key values given")
    for value in values:
        try:
            key_literal(value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return values


def missing_keys(conn: Any, table: CapturedTable, values: Sequence[str]) -> list[str]:
    """The given values of ``table``'s one-column key that no row of it holds, sorted. Compared
    as text, so one query serves a key column of any type (an integer's text is canonical:
    ``010248`` is not order 10248)."""
    from psycopg2 import sql

    schema, name = table.source.split(".")
    query = sql.SQL(
        "SELECT v FROM unnest(%s::text[]) AS v WHERE NOT EXISTS "
        "(SELECT 1 FROM {table} t WHERE t.{column}::text = v) ORDER BY v"
    ).format(table=sql.Identifier(schema, name), column=sql.Identifier(key_column(table)))
    with conn.cursor() as cur:
        cur.execute(query, (sorted(set(values)),))
        return [str(r[0]) for r in cur.fetchall()]


def key_values(conn: Any, table: CapturedTable, values: Sequence[str]) -> list[KeyValue]:
    """The values as the signal's filter is to write them: integers for an integer key column
    (bare, as before), the texts otherwise (quoted). Called once ``missing_keys`` found every
    value in the table, so an integer column's values are canonical integers."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT format_type(atttypid, NULL) FROM pg_attribute"
            " WHERE attrelid = %s::regclass AND attname = %s AND NOT attisdropped",
            (table.source, key_column(table)),
        )
        row = cur.fetchone()
    if row is not None and row[0] in INTEGER_TYPES:
        return [int(v) for v in values]
    return list(values)


def cmd_resnapshot(args: argparse.Namespace) -> int:
    """Ask Debezium to re-send rows of a captured table as they are now: those with the given
    key values, or all. Nothing is requested when a value is refused."""
    if args.keys is None and not args.all:
        print("error: resnapshot needs --keys K1,K2 (or --orders 1,2,3) or --all", file=sys.stderr)
        return 2
    table = captured(args.table)
    keys: list[KeyValue] | None = None
    try:
        column = key_column(table) if args.keys is not None else ""
    except ValueError as e:  # a composite key: only --all
        print(f"error: {e}", file=sys.stderr)
        return 2
    conn = connect(stack_settings(args))
    try:
        if args.keys is not None:
            if missing := missing_keys(conn, table, args.keys):
                shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
                print(
                    f"error: {len(missing)} {column} value(s) not in {table.source}: {shown}. "
                    "Debezium re-sends the rows as they are now, so nothing would be sent for "
                    "them; nothing was requested. A lake row left over for a deleted key goes "
                    f"with a reconcile (cdc-lake lake reconcile --table {table.source}).",
                    file=sys.stderr,
                )
                return 2
            keys = key_values(conn, table, args.keys)
        try:
            signal_id = request_snapshot(conn, keys, table=table)
        except ValueError as e:  # the signal is too long for its table
            print(f"error: {e}", file=sys.stderr)
            return 2
    finally:
        conn.close()
    if keys is None:
        what = f"every row of {table.source}"
    else:
        what = f"{len(set(keys))} row(s) of {table.source} by {column}"
    print(f"requested an incremental snapshot of {what}: signal {signal_id}")
    return 0


def cmd_source(args: argparse.Namespace) -> int:
    from cdc_lake.source.database import prepare_source

    if args.action == "resnapshot":
        return cmd_resnapshot(args)
    settings = stack_settings(args)
    conn = connect(settings)
    try:
        stats, loaded = prepare_source(
            conn, settings.replication_user, scale=args.scale, seed=args.seed
        )
    finally:
        conn.close()
    print(f"outbox rows: {stats.rows:,} (orders {stats.orders:,}, lines {stats.order_lines:,});"
          f" sample data {'loaded' if loaded else 'already present'}")  # fmt: skip
    return 0


def add_source_cli(subparsers: Any) -> None:
    """Register ``cdc-lake source prepare | resnapshot`` on the CLI's subparsers."""
    source = subparsers.add_parser("source", help="the source database")
    source.add_argument("action", choices=["prepare", "resnapshot"])
    source.add_argument(
        "--scale",
        type=number(float, 0.001, 1000, "--scale"),
        default=1.0,
        help="1 = Northwind's 829 orders",
    )
    source.add_argument("--seed", type=int, default=42)
    chosen = source.add_mutually_exclusive_group()
    chosen.add_argument(
        "--keys",
        "--orders",  # its name from when only the outbox's orders could be picked
        dest="keys",
        type=_key_values,
        metavar="K1,K2",
        help="resnapshot: the rows with these key values, comma-separated (a one-column key)",
    )
    chosen.add_argument("--all", action="store_true", help="resnapshot: every row of the table")
    add_table_option(source, "resnapshot: the captured table")
    source.set_defaults(func=cmd_source)
