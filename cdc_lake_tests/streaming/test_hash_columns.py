"""The source connector's ``HashColumns`` transform (``connectors/s3-sink``) on jsonb values as
PostgreSQL prints them, which is what Debezium hands it: under field policies (a field hashed,
one excluded) its text is byte for byte what PostgreSQL prints for the same policies applied to
the value (the digest's SQL, ``cdc_lake/lake/digest.py``), so ``matches_source`` compares them.
The transform runs in a JVM of its own, on the plugin jar the stack built (``HashColumnsProbe``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

from cdc_lake.lake.digest import _sql_text, column_salt
from cdc_lake.lake.schema import SourceColumn, captured_schema
from cdc_lake.source.captured import OUTBOX, UNAVAILABLE_VALUE
from cdc_lake.stack import LocalStack
from cdc_lake_tests.policies import hashed

PROBE = Path(__file__).with_name("HashColumnsProbe.java")
TABLE = replace(OUTBOX, source="probe_fields", key="id", hashed=("doc.phone",),
                exclude=("doc.fax",))  # fmt: skip
# Values PostgreSQL prints with every escape it uses (quote, backslash, \b \f \n \r \t and
# \u00XX for the other control characters), non-ASCII and astral characters as they are, the
# excluded field first, last, alone or absent, a null or empty hashed field, nested objects and
# arrays holding the same names (not top-level: kept), and values that are no object.
DOCS = [
    {"phone": 'say "hi" \\ Zürich ☎ 😀\t\b\f\n\r\x01\x1f', "fax": "030-0076545", "city": "B"},
    {"fax": None, "phone": None, "n": [1, {"phone": "nested"}], "z": {"fax": "kept"}},
    {"phone": "", "fax": ""},
    {"fax": "alone"},
    {"phone": "only"},
    {"a": "x", "fax": "middle", "zz": "y", "phone": "1"},
    {},
    [{"phone": "in an array"}],
    "a string",
    12.5,
    None,
]


def run_probe(stack: LocalStack, salt: str, lines: list[str]) -> list[str]:
    s = stack.settings
    classpath = os.pathsep.join(
        [*map(str, s.classpath_dir("plugins/s3sink").glob("s3sink-*.jar")),
         str(s.classpath_dir("connect") / "*")]
    )  # fmt: skip
    java = shutil.which("java")
    assert java, "java is not on PATH"
    done = subprocess.run(
        [java, "-cp", classpath, str(PROBE)],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True, text=True, encoding="utf-8", timeout=300,
        env={**os.environ, "PROBE_SALT": salt},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_the_transform_writes_what_postgres_prints_under_field_policies(local_stack, pg):
    salt = "salt ünïcode " + uuid.uuid4().hex
    columns = [SourceColumn("id", "int", False), SourceColumn("doc", "jsonb")]
    schema = captured_schema(TABLE, columns)
    with pg.cursor() as cur:
        cur.execute("CREATE TEMP TABLE probe_fields (id int, doc jsonb)")
        for i, doc in enumerate(DOCS):
            cur.execute("INSERT INTO probe_fields VALUES (%s, %s::jsonb)",
                        (i, None if doc is None else json.dumps(doc)))  # fmt: skip
        with column_salt(pg, salt, schema):
            cur.execute(f"SELECT doc::text, {_sql_text('doc', 'json', schema)} "
                        "FROM probe_fields ORDER BY id")  # fmt: skip
            rows = cur.fetchall()
    pg.rollback()
    texts = [r"\N" if r[0] is None else r[0] for r in rows]
    wanted = [r"\N" if r[1] is None else r[1] for r in rows]
    assert all("\n" not in t for t in texts)  # PostgreSQL escapes them: one value per line
    got = run_probe(local_stack, salt, [*texts, UNAVAILABLE_VALUE, '{"phone": 12}'])
    assert got[: len(DOCS)] == wanted
    # The first value: its phone is the connector's hash of the unescaped string, its fax gone.
    first = json.loads(got[0])
    assert first["phone"] == hashed(salt, str(DOCS[0]["phone"]))  # type: ignore[index]
    assert "fax" not in first and json.loads(got[3]) == {} and got[1].count('"fax"') == 1
    # Debezium's placeholder for a value the WAL did not carry passes as it is (the lake fills
    # it from the previous, already hashed, value); a hashed field that is not a string stops
    # the record, naming the field and not the value.
    assert got[len(DOCS)] == UNAVAILABLE_VALUE
    error = got[len(DOCS) + 1]
    assert error.startswith("ERROR s.t.doc.phone is declared hashed, but its value is not a "
                            "string") and "12" not in error  # fmt: skip
