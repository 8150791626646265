"""The captured tables: one declaration each, from which everything about the table is derived.

A declaration names the source table, its key and how the lake partitions it. Nothing else about
the table is written anywhere:

- its columns are the source's, read from PostgreSQL's catalog at each refresh, or from the
  table's ``CREATE TABLE`` in ``sql/`` where no database is at hand
  (``cdc_lake/lake/tables.py``, ``cdc_lake/lake/schema/source.py``);
- the ordering fields and the merge rule are the same for every table
  (``cdc_lake/lake/ordering.py``);
- the source prepares each one for capture: in the publication, readable by the replication
  role (``cdc_lake/source/database.py``); Debezium captures each one into a topic of its own,
  ``<topic prefix>.<source>``, and the S3 sink writes each topic under a folder of its own
  (``cdc_lake/streaming/connect_config.py``).

To capture another table, add its declaration to ``TABLES`` (docs/adding-a-table.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

# The checks the upsert app evaluates on every captured table's Hudi table: this one is named
# the same on each; the key and delete checks are named after the table (below).
RESCAN_CHECK = "incremental_matches_rescan"

# Debezium's placeholder for a value the WAL did not carry (a TOASTed column that an UPDATE left
# unchanged, on a table whose replica identity is not FULL). The source connector is set to it
# (``cdc_lake/streaming/connect_config.py``) and the lake fills it in or stops
# (``cdc_lake/lake/unavailable.py``).
UNAVAILABLE_VALUE = "__debezium_unavailable_value"

# full: the source asset sets REPLICA IDENTITY FULL, so every update and delete carries the
# whole row (TOASTed values included); default: the table is left as it is (a user without
# owner rights, as on RDS), and the lake fills an unchanged TOASTed value in from the key's
# previous one.
ReplicaIdentity = Literal["full", "default"]
REPLICA_IDENTITIES: tuple[ReplicaIdentity, ...] = get_args(ReplicaIdentity)


# A policy on a top-level field of a jsonb column: "<column>.<field>".
JSON_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z0-9_]+")


def json_field(name: str) -> tuple[str, str] | None:
    """A policy's name as (jsonb column, field) when it names a field, else None (a column)."""
    column, dot, field = name.partition(".")
    return (column, field) if dot else None


def key_columns(key: str | Sequence[str]) -> tuple[str, ...]:
    """A declared key as its columns: one name, or several for a composite key."""
    keys = (key,) if isinstance(key, str) else tuple(str(k) for k in key)
    if not keys or len(set(keys)) != len(keys) or not all(keys):
        raise ValueError(f"a key is one column or several distinct ones, not {key!r}")
    return keys


@dataclass(frozen=True)
class CapturedTable:
    source: str  # schema-qualified, as Debezium's table.include.list names it
    # The record key: one lake row per value. One column, or a tuple of them for a composite
    # key: the source's primary key, or a unique index on NOT NULL columns where it has none
    # (``source/row_key.py`` checks). Debezium keys the table's records by it.
    key: str | tuple[str, ...]
    ddl_file: str  # the file in sql/ whose CREATE TABLE declares it
    # A lake column of its own, the year of a source date column ("": none).
    partition_field: str = ""
    partition_from: str = ""
    # Whether the Hudi table is partitioned by ``partition_field`` (False: it is only a column).
    # Takes effect when the lake table is created: an existing table keeps its layout, and the
    # refresh says so (docs/cdc-semantics.md, "Partitions").
    partitioned: bool = True
    # What one row is, in the names of its checks ("no_deleted_orders"); "": the table's name.
    rows: str = ""
    # Whether this project creates and keeps the table (its source asset applies sql/, and
    # triggers fill it); False: the application's table, an external asset here.
    maintained: bool = False
    # How the source is prepared for updates of large values (``ReplicaIdentity`` above).
    replica_identity: ReplicaIdentity = "full"
    # Names in Dagster ("": derived from the table's name, ``cdc_lake/defs/keys.py``): the
    # source asset's (``postgres/<schema>/<this>``), the refresh job's and the sensor's. Kept as
    # existing instances know them.
    source_asset: str = ""
    refresh_job: str = ""
    sensor: str = ""
    # What a row of its lake table is, for the Hudi asset's description ("": a generic one).
    description: str = ""
    # The marts built from its lake table (``cdc_lake/defs/marts/``), by name: they join its
    # refresh job, and read its key from this declaration.
    marts: tuple[str, ...] = ()
    # Column policies for personal data, applied by the source connector so that the value
    # never enters Kafka (docs/column-policies.md). ``exclude``: the column is not captured at
    # all (Debezium's column.exclude.list); the lake has no such column. ``hashed``: text
    # columns whose values are replaced by a salted SHA-256, hex (the ``HashColumns`` transform,
    # connectors/); equal values still join. Changing either later stops the refresh, naming
    # the column, until the lake table is rebuilt (``cdc_lake/lake/schema/policy.py``).
    exclude: tuple[str, ...] = ()
    hashed: tuple[str, ...] = ()
    # A history table beside the lake table: every version of every row, with the source times
    # it was valid (valid_from, valid_to), kept from the lake's commits (docs/history.md,
    # ``cdc_lake/lake/history.py``). Off: the lake table alone.
    history: bool = False
    # The lake server warms up on a throwaway table of this table's shape at its start
    # (``cdc_lake/stack/warm_up.py``): the first declared table that says so.
    warm_up: bool = False

    def __post_init__(self) -> None:
        try:
            key_columns(self.key)
        except ValueError as e:
            raise ValueError(f"{self.source}: {e} (cdc_lake/source/captured.py)") from None
        for policy, columns in (("exclude", self.exclude), ("hashed", self.hashed)):
            if isinstance(columns, str) or not all(isinstance(c, str) and c for c in columns):
                raise ValueError(
                    f"{self.source}: {policy} is a tuple of column names, not {columns!r} "
                    "(cdc_lake/source/captured.py)"
                )
        for name in (*self.exclude, *self.hashed):
            if "." in name and not JSON_FIELD.fullmatch(name):
                raise ValueError(
                    f"{self.source}.{name}: a field policy names <jsonb column>.<top-level "
                    "field>, each of letters, digits and underscores (cdc_lake/source/captured.py)"
                )
        both = set(self.exclude) & set(self.hashed)
        kept = set(self.keys) | {self.partition_from} - {""}
        whole = set(self.exclude) | set(self.hashed)
        inside = self.json_columns & whole
        for column in sorted(both | (kept & whole) | inside):
            why = (
                "both excluded and hashed" if column in both
                else "the key or a partition source" if column in kept
                else "a column with a policy of its own and one on a field of it"
            )  # fmt: skip
            raise ValueError(
                f"{self.source}.{column}: a column policy cannot apply here: it is {why} "
                "(cdc_lake/source/captured.py)"
            )
        for name in whole:
            field = json_field(name)
            if field and field[0] in kept:
                raise ValueError(
                    f"{self.source}.{name}: a field policy cannot apply to the key or a "
                    "partition source (cdc_lake/source/captured.py)"
                )
        if self.replica_identity not in REPLICA_IDENTITIES:
            raise ValueError(
                f"{self.source}: replica_identity {self.replica_identity!r} is not one of "
                f"{', '.join(REPLICA_IDENTITIES)} (cdc_lake/source/captured.py)"
            )

    @property
    def name(self) -> str:
        return self.source.split(".")[-1]

    def to_json(self) -> dict[str, object]:
        """The declaration as JSON: it travels whole to the Spark apps, which never look a table
        up by name (so a lake server started before a declaration was added takes it)."""
        return {
            "source": self.source,
            "key": list(self.keys),
            "ddl_file": self.ddl_file,
            "partition_field": self.partition_field,
            "partition_from": self.partition_from,
            "partitioned": self.partitioned,
            "rows": self.rows,
            "maintained": self.maintained,
            "replica_identity": self.replica_identity,
            "source_asset": self.source_asset,
            "refresh_job": self.refresh_job,
            "sensor": self.sensor,
            "description": self.description,
            "marts": list(self.marts),
            "exclude": list(self.exclude),
            "hashed": list(self.hashed),
            "history": self.history,
            "warm_up": self.warm_up,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CapturedTable:
        keys = key_columns(data["key"])
        return cls(
            source=str(data["source"]),
            key=keys[0] if len(keys) == 1 else keys,
            ddl_file=str(data["ddl_file"]),
            partition_field=str(data.get("partition_field", "")),
            partition_from=str(data.get("partition_from", "")),
            partitioned=bool(data.get("partitioned", True)),
            rows=str(data.get("rows", "")),
            maintained=bool(data.get("maintained", False)),
            replica_identity=data.get("replica_identity", "full"),
            source_asset=str(data.get("source_asset", "")),
            refresh_job=str(data.get("refresh_job", "")),
            sensor=str(data.get("sensor", "")),
            description=str(data.get("description", "")),
            marts=tuple(str(m) for m in data.get("marts", ())),
            exclude=tuple(str(c) for c in data.get("exclude", ())),
            hashed=tuple(str(c) for c in data.get("hashed", ())),
            history=bool(data.get("history", False)),
            warm_up=bool(data.get("warm_up", False)),
        )

    @property
    def keys(self) -> tuple[str, ...]:
        """The key's columns, in the declaration's order."""
        return key_columns(self.key)

    @property
    def json_columns(self) -> set[str]:
        """The jsonb columns with field policies (``<column>.<field>`` in exclude or hashed)."""
        return {n.partition(".")[0] for n in (*self.exclude, *self.hashed) if json_field(n)}

    @property
    def hashed_fields(self) -> tuple[str, ...]:
        """The hashed fields of jsonb columns (``<column>.<field>``), of ``hashed``."""
        return tuple(n for n in self.hashed if json_field(n))

    @property
    def key_unique_check(self) -> str:
        """The check that the key is unique in the lake (evaluated by the upsert app)."""
        return f"{'_'.join(self.keys)}_unique"

    @property
    def no_deleted_check(self) -> str:
        """The check that no deleted row survives in the lake (evaluated by the upsert app)."""
        return f"no_deleted_{self.rows or self.name}"

    @property
    def lake_partition(self) -> tuple[str, ...]:
        """The lake's partition column, which the source does not have (none or one)."""
        return (self.partition_field,) if self.partition_field else ()

    @property
    def layout_field(self) -> str:
        """The column a new Hudi table of it is partitioned by ("": none)."""
        return self.partition_field if self.partitioned else ""


OUTBOX = CapturedTable(
    source="datalake.cdc_events",
    key="order_id",
    ddl_file="002_outbox.sql",
    partition_field="order_year",
    partition_from="order_date",
    # Year partitions pay off only for a large table with a skewed workload: off by default.
    partitioned=False,
    rows="orders",
    maintained=True,
    source_asset="cdc_events_outbox",
    refresh_job="lake_refresh",
    sensor="raw_cdc_files_sensor",
    description="The current state of every order, one row per order_id, upserted from the raw "
    "CDC files into an Apache Hudi table (COPY_ON_WRITE by default). Dates are DATE, updated_at "
    "TIMESTAMP; order_items, products, customer, employee, shipper and shipment stay JSON "
    "strings, the customer's and the employee's phones hashed, the customer's fax left out "
    "(docs/column-policies.md).",
    marts=("order_items",),
    # Each order carries its customer's row as JSON: the same personal data as the customers'
    # own table, under the same policy; and its employee's, whose home phone is hashed too.
    hashed=("customer.phone", "employee.home_phone"),
    exclude=("customer.fax",),
    warm_up=True,
)

# Captured beside the outbox: a table needs its declaration and nothing else. Its phone numbers
# reach the lake hashed, and its fax numbers not at all; every version of a customer is kept.
CUSTOMERS = CapturedTable(
    source="datalake.customers",
    key="customer_id",
    ddl_file="001_northwind.sql",
    hashed=("phone",),
    exclude=("fax",),
    history=True,
)

TABLES = (OUTBOX, CUSTOMERS)


def captured(source: str) -> CapturedTable:
    """The declaration of the captured table ``source`` (schema-qualified). Raises KeyError
    naming the declared tables for any other."""
    for table in TABLES:
        if table.source == source:
            return table
    declared = ", ".join(t.source for t in TABLES)
    raise KeyError(
        f"{source} is not a captured table (declared: {declared}; cdc_lake/source/captured.py)"
    )


def mart_table(mart: str) -> CapturedTable:
    """The captured table whose lake table the mart ``mart`` is built from (its declaration's
    ``marts``). Raises KeyError unless exactly one declares it."""
    tables = [t for t in TABLES if mart in t.marts]
    if len(tables) != 1:
        declared = ", ".join(t.source for t in tables) or "none"
        raise KeyError(
            f"the mart {mart!r} must be built from one captured table, declared by: {declared} "
            "(cdc_lake/source/captured.py)"
        )
    return tables[0]
