"""Reading the source's columns.

Where the columns come from
    PostgreSQL's catalog (``columns_from_catalog``): the lake asset reads it at every refresh
    and passes it to the upsert app, locally and on EMR. Without a database (unit tests,
    benchmarks) the table's ``CREATE TABLE`` in ``sql/`` is read instead (``columns_from_ddl``);
    a test on the real stack checks that both agree. Nothing else lists a table's columns.
"""

from __future__ import annotations

import re
from typing import Any

from cdc_lake.lake.schema.columns import SchemaChangeError, SourceColumn


def columns_from_catalog(conn: Any, table: str) -> list[SourceColumn]:
    """The columns of ``schema.table`` in PostgreSQL's catalog, in attribute order."""
    schema, name = table.split(".", 1)
    with conn.cursor() as cur:
        cur.execute(
            """
            SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull, a.attnum,
                   CASE WHEN a.atthasmissing THEN (a.attmissingval::text::text[])[1] END
            FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY a.attnum
            """,
            (schema, name),
        )
        rows = cur.fetchall()
    if not rows:
        raise SchemaChangeError(f"{table}: no such table in the source database")
    # psycopg2 sets DateStyle ISO on every connection: dates and times print as ISO 8601.
    return [
        SourceColumn(str(n), str(t), bool(null), int(pos), missing)
        for n, t, null, pos, missing in rows
    ]


_CREATE = re.compile(
    r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<name>[\w.]+)\s*\((?P<body>.*?)\)\s*;",
    re.IGNORECASE | re.DOTALL,
)


def columns_from_ddl(sql: str, table: str) -> list[SourceColumn]:
    """The columns of ``table`` (``schema.name``; the DDL may leave the schema to its
    search_path) as its ``CREATE TABLE`` in ``sql`` declares them."""
    name = table.split(".")[-1]
    for m in _CREATE.finditer(sql):
        if m.group("name").split(".")[-1] != name:
            continue
        out = []
        for part in _split_top_level(m.group("body")):
            words = part.split()
            if not words or words[0].upper() in ("PRIMARY", "UNIQUE", "CONSTRAINT", "CHECK"):
                continue
            type_words = []
            for w in words[1:]:
                if w.upper() in ("NOT", "NULL", "PRIMARY", "DEFAULT", "REFERENCES", "UNIQUE"):
                    break
                type_words.append(w)
            nullable = "NOT NULL" not in part.upper() and "PRIMARY KEY" not in part.upper()
            out.append(SourceColumn(words[0], " ".join(type_words), nullable))
        return out
    raise SchemaChangeError(f"{table}: no CREATE TABLE for it in the SQL")


def _split_top_level(body: str) -> list[str]:
    body = re.sub(r"--[^\n]*", "", body)
    parts, depth, current = [], 0, []
    for ch in body:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    parts.append("".join(current).strip())
    return [p for p in parts if p]
