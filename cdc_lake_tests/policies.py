"""What the lake should hold under a table's column policies, computed here in Python, apart from
the code under test (the connector's ``HashColumns`` and the digest's SQL): the tests compare
the lake with the source through these."""

from __future__ import annotations

import hashlib
from typing import Any

from cdc_lake.source.captured import CapturedTable, json_field


def hashed(salt: str, value: str | None) -> str | None:
    """A hashed value as the source connector writes it: hex SHA-256 of salt then value."""
    return None if value is None else hashlib.sha256((salt + value).encode()).hexdigest()


def as_lake_json(table: CapturedTable, column: str, doc: Any, salt: str) -> Any:
    """The parsed JSON ``doc`` of ``table.column`` at the source, as the lake holds it: the
    declared fields left out, the hashed ones' strings hashed."""
    if not isinstance(doc, dict):
        return doc
    out = dict(doc)
    for name in table.exclude:
        if json_field(name) == (column, field := name.partition(".")[2]):
            out.pop(field, None)
    for name in table.hashed:
        field = name.partition(".")[2]
        if json_field(name) == (column, field) and isinstance(out.get(field), str):
            out[field] = hashed(salt, out[field])
    return out
