"""The lake's columns in Spark, by their kind (``cdc_lake/lake/schema/columns.py``): the Spark
type a DDL type name stands for (``spark_type``), a raw field as the lake column (``_to_lake``),
and a column's missing value as Debezium would write it in a raw line (``raw_missing_value``),
with the day, time and epoch arithmetic that takes."""

from __future__ import annotations

import datetime
import re
from functools import cache
from typing import TYPE_CHECKING, Any

from cdc_lake.lake.schema.columns import FLOAT_KINDS, TIME_KINDS, LakeColumn, SchemaChangeError

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType


@cache
def spark_type(ddl: str) -> DataType:
    """The Spark type a DDL type name (``bigint``, ``decimal(10,2)``) stands for. PySpark parses
    it in the JVM, about 10 ms a call (it tries the text as a schema first and fails), and a
    struct of the outbox's columns takes some thirty: cached, as the names are few and a type
    holds no JVM state."""
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(ddl)


def _to_lake(kind: str, col: Column) -> Column:
    """A raw field of ``kind`` as the lake column."""
    from pyspark.sql import functions as F

    if kind == "trimmed":
        return F.trim(col)
    if kind == "date":
        return F.date_from_unix_date(col)
    if kind == "timestamptz":
        # try_: null, not an ANSI-mode failure; parsing has already rejected bad text.
        return F.try_to_timestamp(col)
    if kind == "float4":
        return col.cast("double")  # exact: every float is a double
    if kind == "timestamp_ms":
        return F.timestamp_millis(col)
    if kind == "timestamp_us":
        return F.timestamp_micros(col)
    if kind == "time_ms":
        return col.cast("bigint") * 1000
    return col


def raw_missing_value(column: LakeColumn, table: str) -> Any:
    """A column's missing value as Debezium would write it in a raw line (see ``KINDS``)."""
    text, kind = column.missing_value, column.kind
    if text is None:
        return None  # a column added again without a default: null
    try:
        if kind == "int":
            return int(text)
        if kind == "bool":
            return {"t": True, "f": False}[text]
        if kind in FLOAT_KINDS:
            return float(text)
        if kind == "date":
            return (datetime.date.fromisoformat(text) - _EPOCH.date()).days
        if kind == "timestamptz":
            instant = datetime.datetime.fromisoformat(text).astimezone(datetime.UTC)
            return instant.isoformat().replace("+00:00", "Z")
        if kind in ("timestamp_ms", "timestamp_us"):
            micros = (datetime.datetime.fromisoformat(text) - _EPOCH) // _MICROSECOND
            return micros // 1000 if kind == "timestamp_ms" else micros
        if kind in TIME_KINDS:
            micros = _micros_since_midnight(text)
            return micros // 1000 if kind == "time_ms" else micros
    except (ValueError, KeyError) as e:
        raise SchemaChangeError(
            f"{table}: column {column.name!r} was added with the default {text!r}, which rows "
            f"stored before read but cdc-lake cannot carry to the lake as {column.source_type} "
            f"({e}). Nothing was committed. Way forward: UPDATE ... SET {column.name} = "
            f"{column.name} on every row, so each row's change event carries its value, then "
            "rewrite the table (VACUUM FULL), which clears the default that rows stored before "
            "read (the catalog's attmissingval) and with it this conversion."
        ) from e
    return text  # text, bpchar (trimmed on the way in), jsonb's and numeric's exact text


_EPOCH = datetime.datetime(1970, 1, 1)
_MICROSECOND = datetime.timedelta(microseconds=1)
_DAY_MICROS = 86_400_000_000


def _micros_since_midnight(text: str) -> int:
    """A ``time``'s text as microseconds since midnight. PostgreSQL's 24:00:00 is the day's
    end, which Debezium sends as 86,400,000,000 (DBZ-1164) and Python's time cannot hold."""
    if re.fullmatch(r"24:00(:00(\.0*)?)?", text):
        return _DAY_MICROS
    clock = datetime.datetime.combine(_EPOCH, datetime.time.fromisoformat(text))
    return (clock - _EPOCH) // _MICROSECOND
