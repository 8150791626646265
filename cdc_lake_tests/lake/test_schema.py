"""The lake's columns from the source's: kinds, evolution, the stops, and the declaration
checked against PostgreSQL's catalog on the real stack."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cdc_lake.lake.schema import (
    KINDS,
    LakeSchema,
    SchemaChangeError,
    SourceColumn,
    UnsupportedColumnError,
    columns_from_catalog,
    columns_from_ddl,
    compare,
    describe_change,
    evolve,
    initial,
    lake_column,
    raw_missing_value,
    spark_type,
    to_backfill,
)
from cdc_lake.lake.tables import declared_columns
from cdc_lake.source.captured import OUTBOX

TABLE = "datalake.t"
BASE = [SourceColumn("id", "integer", False), SourceColumn("name", "text")]


def lake_types(schema: LakeSchema) -> dict[str, str]:
    return {c.name: c.lake_type for c in schema.columns}


def test_ddl_declares_the_outbox_columns_with_their_kinds():
    cols = declared_columns(OUTBOX)
    assert [c.name for c in cols][:2] == ["order_id", "customer_id"]
    kinds = {c.name: c.kind for c in cols}
    assert kinds["order_id"] == "int" and kinds["customer_id"] == "trimmed"
    assert kinds["order_date"] == "date" and kinds["updated_at"] == "timestamptz"
    assert kinds["order_items"] == "json"
    assert not next(c for c in cols if c.name == "order_id").nullable


def test_ddl_parser_reads_types_with_arguments_and_constraints():
    sql = """
    CREATE TABLE IF NOT EXISTS other (x int);
    CREATE TABLE s.t (
        id bigint PRIMARY KEY,  -- the key, a comment (with parentheses, and a comma)
        amount numeric(10, 2) NOT NULL DEFAULT 0,
        code character varying(40),
        at timestamp with time zone,
        UNIQUE (code)
    );
    """
    cols = columns_from_ddl(sql, "s.t")
    assert [(c.name, c.pg_type, c.nullable) for c in cols] == [
        ("id", "bigint", False),
        ("amount", "numeric(10, 2)", False),
        ("code", "character varying(40)", True),
        ("at", "timestamp with time zone", True),
    ]
    assert [c.kind for c in cols] == ["int", "decimal", "text", "timestamptz"]
    with pytest.raises(SchemaChangeError, match="no CREATE TABLE"):
        columns_from_ddl(sql, "s.missing")


def test_a_new_table_takes_the_source_columns():
    schema = evolve(TABLE, "id", BASE, None)
    assert schema.names == ("id", "name") and schema.version == 1
    assert lake_types(schema) == {"id": "bigint", "name": "string"}


def test_an_added_column_goes_at_the_end_and_bumps_the_version():
    v1 = initial(TABLE, "id", BASE)
    source = [BASE[0], SourceColumn("channel", "text"), BASE[1]]  # position at the source
    v2 = evolve(TABLE, "id", source, lake_types(v1), v1)
    assert v2.names == ("id", "name", "channel") and v2.version == 2
    assert v2.digest_signature() == ["channel:text", "id:int", "name:text"]
    # The same columns again: the same version.
    assert evolve(TABLE, "id", source, lake_types(v2), v2).version == 2


def test_integer_widening_changes_no_lake_type():
    v1 = initial(TABLE, "id", [*BASE, SourceColumn("qty", "smallint")])
    v2 = evolve(TABLE, "id", [*BASE, SourceColumn("qty", "bigint")], lake_types(v1), v1)
    assert lake_types(v2) == lake_types(v1) and v2.column("qty").source_type == "bigint"
    assert v2.version == 2


def test_a_dropped_column_stays_in_the_lake_out_of_the_digest():
    v1 = initial(TABLE, "id", BASE)
    v2 = evolve(TABLE, "id", BASE[:1], lake_types(v1), v1)
    assert v2.names == ("id", "name") and v2.dropped == ("name",)
    assert v2.column("name").kind == "text"  # kept from the recorded schema
    assert v2.digest_signature() == ["id:int"] and v2.version == 2
    # Added back: live again.
    v3 = evolve(TABLE, "id", BASE, lake_types(v2), v2)
    assert v3.dropped == () and v3.version == 3


@pytest.mark.parametrize(
    ("old", "new"),
    [("text", "integer"), ("integer", "text"), ("date", "timestamp with time zone"),
     ("jsonb", "boolean"), ("text", "jsonb"), ("double precision", "real")],
)  # fmt: skip
def test_an_incompatible_type_change_stops_naming_table_column_and_types(old, new):
    v1 = initial(TABLE, "id", [*BASE, SourceColumn("c", old)])
    with pytest.raises(SchemaChangeError) as err:
        evolve(TABLE, "id", [*BASE, SourceColumn("c", new)], lake_types(v1), v1)
    text = str(err.value)
    assert TABLE in text and "'c'" in text and old in text and new in text
    assert "Nothing was committed" in text and "Way forward" in text


def test_a_key_change_stops():
    v1 = initial(TABLE, "id", BASE)
    with pytest.raises(SchemaChangeError, match="key column 'id' is gone"):
        evolve(TABLE, "id", BASE[1:], lake_types(v1), v1)
    with pytest.raises(SchemaChangeError, match="on its key column"):
        evolve(TABLE, "id", [SourceColumn("id", "text"), BASE[1]], lake_types(v1), v1)


def test_a_rename_stops_by_the_catalog_position():
    source = [SourceColumn("id", "integer", False, 1), SourceColumn("name", "text", True, 2)]
    v1 = initial(TABLE, "id", source)
    renamed = [source[0], SourceColumn("label", "text", True, 2)]
    with pytest.raises(SchemaChangeError, match="'name' was renamed to 'label'"):
        evolve(TABLE, "id", renamed, lake_types(v1), v1)
    # A drop and an add: a new attnum, so the lake keeps the old column and adds the new one.
    dropped_added = [source[0], SourceColumn("label", "text", True, 3)]
    v2 = evolve(TABLE, "id", dropped_added, lake_types(v1), v1)
    assert v2.dropped == ("name",) and v2.names == ("id", "name", "label")


def test_an_unsupported_type_stops_naming_it():
    with pytest.raises(UnsupportedColumnError, match=r"'where' has type point"):
        initial(TABLE, "id", [*BASE, SourceColumn("where", "point")])


def test_a_table_without_a_recorded_schema_takes_kinds_from_its_types():
    v2 = evolve(TABLE, "id", BASE, {"id": "bigint", "name": "string", "old": "date"})
    assert v2.column("old").dropped and v2.column("old").kind == "date"
    assert v2.version == 2  # the lake's columns are not the source's


def test_compare_names_missing_changed_and_dropped():
    lake = initial(TABLE, "id", BASE)
    source = [SourceColumn("id", "bigint"), SourceColumn("new", "text")]
    diff = compare(source, lake)
    assert diff.missing == ("new",) and diff.dropped == ("name",)
    assert diff.changed == ("id: integer -> bigint",) and not diff.equal
    assert compare(BASE, lake).equal


def test_describe_change_names_what_changed():
    v1 = initial(TABLE, "id", BASE)
    v2 = evolve(TABLE, "id", [BASE[0], SourceColumn("c", "text")], lake_types(v1), v1)
    assert describe_change(v1, v2) == (
        "schema v1 -> v2: name dropped at the source, kept; added c (text)"
    )
    assert describe_change(v2, v2) is None and describe_change(None, v2) is None


def test_schema_round_trips_as_json():
    source = [SourceColumn("id", "integer", False, 1), SourceColumn("name", "text", True, 3)]
    v = evolve(TABLE, "id", source[:1], lake_types(initial(TABLE, "id", source)))
    assert v.column("id").position == 1
    assert LakeSchema.from_json(json.loads(json.dumps(v.to_json()))) == v


def test_the_declaration_matches_the_catalog(ingested, pg):
    """The DDL the tests and benchmarks read and the catalog the refresh reads agree."""
    catalog = columns_from_catalog(pg, OUTBOX.source)
    declared = declared_columns(OUTBOX)
    assert [(c.name, c.kind, c.nullable) for c in catalog] == [
        (c.name, c.kind, c.nullable) for c in declared
    ]
    with pg.cursor() as cur:
        cur.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'datalake' AND table_name = 'cdc_events' "
            "ORDER BY ordinal_position"
        )
        info = cur.fetchall()
    assert [n for n, _ in info] == [c.name for c in catalog]
    assert all(SourceColumn(n, t).kind == c.kind for (n, t), c in zip(info, catalog, strict=True))
    with pytest.raises(SchemaChangeError, match="no such table"):
        columns_from_catalog(pg, "datalake.no_such_table")


def test_floats_are_doubles_in_the_lake_and_real_to_double_stops():
    v1 = initial(TABLE, "id", [*BASE, SourceColumn("w", "real"), SourceColumn("d", "float8")])
    assert [(c.kind, c.lake_type) for c in v1.columns[-2:]] == [
        ("float4", "double"),
        ("float8", "double"),
    ]
    assert KINDS["float4"].raw == "float"  # a real's text is parsed as a real
    with pytest.raises(SchemaChangeError) as err:
        evolve(TABLE, "id", [*BASE, SourceColumn("w", "double precision"),
                             SourceColumn("d", "float8")], lake_types(v1), v1)  # fmt: skip
    text = str(err.value)
    assert "'w' changed type from real to double precision" in text
    assert "Nothing was committed" in text and "Way forward" in text
    # Within one kind nothing stops: float8 and double precision are one type.
    same = [*BASE, SourceColumn("w", "real"), SourceColumn("d", "double precision")]
    v2 = evolve(TABLE, "id", same, lake_types(v1), v1)
    assert [c.kind for c in v2.columns] == [c.kind for c in v1.columns]


@pytest.mark.parametrize(
    ("pg_type", "kind"),
    [("timestamp without time zone", "timestamp_us"), ("timestamp(6) without time zone",
      "timestamp_us"), ("timestamp(4)", "timestamp_us"), ("timestamp(3) without time zone",
      "timestamp_ms"), ("timestamp(0)", "timestamp_ms"), ("timestamp with time zone",
      "timestamptz"), ("timestamp(3) with time zone", "timestamptz")],
)  # fmt: skip
def test_a_timestamp_kind_follows_debeziums_adaptive_precision(pg_type, kind):
    assert SourceColumn("t", pg_type).kind == kind


@pytest.mark.parametrize(
    ("pg_type", "kind"),
    [("time without time zone", "time_us"), ("time(6) without time zone", "time_us"),
     ("time(4) without time zone", "time_us"), ("time(3) without time zone", "time_ms"),
     ("time(0)", "time_ms"), ("time with time zone", None)],
)  # fmt: skip
def test_a_time_kind_follows_debeziums_adaptive_precision(pg_type, kind):
    assert SourceColumn("t", pg_type).kind == kind


def test_a_time_is_microseconds_in_the_lake_and_no_integer_becomes_one():
    t3, t6 = SourceColumn("t", "time(3) without time zone"), SourceColumn("t", "time")
    n = SourceColumn("n", "integer")
    v1 = initial(TABLE, "id", [*BASE, t3, n])
    assert [c.lake_type for c in v1.columns[2:]] == ["bigint", "bigint"]
    # All bigint in the lake, but the raw files hold the old kind's numbers (an integer,
    # milliseconds), which a replay would read as the new kind's.
    as_int, as_time = SourceColumn("t", "integer"), replace(n, pg_type="time")
    for source in ([*BASE, as_int, n], [*BASE, t3, as_time], [*BASE, t6, n]):
        with pytest.raises(SchemaChangeError, match="changed type from"):
            evolve(TABLE, "id", source, lake_types(v1), v1)


def test_a_timestamp_precision_across_3_stops():
    v1 = initial(TABLE, "id", [*BASE, SourceColumn("t", "timestamp(3) without time zone")])
    with pytest.raises(SchemaChangeError, match="'t' changed type from timestamp"):
        evolve(TABLE, "id", [*BASE, SourceColumn("t", "timestamp without time zone")],
               lake_types(v1), v1)  # fmt: skip


def test_float_precision_decides_real_or_double():
    assert SourceColumn("x", "float(24)").kind == "float4"
    assert SourceColumn("x", "float(25)").kind == "float8"
    assert SourceColumn("x", "float").kind == "float8"


def test_a_float_key_is_refused():
    with pytest.raises(SchemaChangeError, match="key column 'id' is a float"):
        initial(TABLE, "id", [SourceColumn("id", "double precision", False)])


def test_numeric_to_text_keeps_its_values_and_a_readded_column_keeps_its_kind():
    v1 = initial(TABLE, "id", [*BASE, SourceColumn("n", "numeric(10,2)")])
    v2 = evolve(TABLE, "id", [*BASE, SourceColumn("n", "text")], lake_types(v1), v1)
    assert v2.column("n").kind == "text"
    # Dropped, then added back as another kind of the same lake type: the old rows' values in
    # the lake were read as the old kind, so this stops as a direct change would.
    f1 = initial(TABLE, "id", [*BASE, SourceColumn("w", "real")])
    f2 = evolve(TABLE, "id", BASE, lake_types(f1), f1)
    with pytest.raises(SchemaChangeError, match="'w' changed type"):
        evolve(TABLE, "id", [*BASE, SourceColumn("w", "double precision")], lake_types(f2), f2)


@pytest.mark.parametrize(
    ("pg_type", "text", "raw"),
    [
        ("integer", "42", 42),
        ("boolean", "t", True),
        ("text", "web", "web"),
        ("character(5)", "ab   ", "ab   "),  # trimmed on the way in, like Debezium's text
        ("numeric(6,2)", "2.50", "2.50"),
        ("jsonb", '{"x": [1, "a b"]}', '{"x": [1, "a b"]}'),
        ("date", "1969-12-31", -1),
        ("timestamp with time zone", "2026-01-02 03:04:05.5+01", "2026-01-02T02:04:05.500000Z"),
        ("timestamp(3) without time zone", "1969-07-20 20:17:40.25", -14182940 * 1000 + 250),
        ("timestamp without time zone", "1970-01-01 00:00:01.000002", 1_000_002),
        ("time without time zone", "23:59:59.999999", 86_400_000_000 - 1),
        ("time(3) without time zone", "07:30:15.125", 27_015_125),
        ("time without time zone", "24:00:00", 86_400_000_000),  # Debezium's, DBZ-1164
        ("double precision", "NaN", "nan"),
        ("real", "1.1", 1.1),
    ],
)
def test_a_missing_value_is_written_as_debezium_writes_the_field(pg_type, text, raw):
    column = lake_column(SourceColumn("c", pg_type, True, 2, text), TABLE)
    value = raw_missing_value(column, TABLE)
    assert str(value) == raw if raw == "nan" else value == raw


@pytest.mark.parametrize(
    ("pg_type", "text"), [("date", "infinity"), ("boolean", "maybe"), ("time", "25:00:00")]
)
def test_a_missing_value_the_lake_cannot_carry_stops_naming_it(pg_type, text):
    column = lake_column(SourceColumn("c", pg_type, True, 2, text), TABLE)
    with pytest.raises(SchemaChangeError, match=rf"{TABLE}: column 'c' was added with the default"):
        raw_missing_value(column, TABLE)


def test_the_missing_value_is_kept_from_when_the_lake_took_the_column():
    v1 = initial(TABLE, "id", BASE)
    added = SourceColumn("channel", "text", True, 3, "retail")
    v2 = evolve(TABLE, "id", [*BASE, added], lake_types(v1), v1)
    assert v2.column("channel").missing_value == "retail" and v2.version == 2
    assert to_backfill(lake_types(v1), v1, v2) == (v2.column("channel"),)
    assert LakeSchema.from_json(json.loads(json.dumps(v2.to_json()))) == v2
    # A rewrite at the source clears attmissingval: the lake keeps the value, nothing to fill.
    cleared = SourceColumn("channel", "text", True, 3)
    v3 = evolve(TABLE, "id", [*BASE, cleared], lake_types(v2), v2)
    assert v3.column("channel").missing_value == "retail" and v3.version == 2
    assert to_backfill(lake_types(v2), v2, v3) == ()
    # Dropped, then added again with another default: the stored rows get the new one.
    v4 = evolve(TABLE, "id", BASE, lake_types(v3), v3)
    again = SourceColumn("channel", "text", True, 4, "shop")
    v5 = evolve(TABLE, "id", [*BASE, again], lake_types(v4), v4)
    assert [c.name for c in to_backfill(lake_types(v4), v4, v5)] == ["channel"]
    assert v5.column("channel").missing_value == "shop"
    # Dropped and added again between two refreshes: its attnum moved.
    unseen = SourceColumn("channel", "text", True, 5, "mail")
    v6 = evolve(TABLE, "id", [*BASE, unseen], lake_types(v5), v5)
    assert to_backfill(lake_types(v5), v5, v6) == (v6.column("channel"),)
    assert v6.column("channel").missing_value == "mail" and v6.version == 5
    # Added again without a default: the old values are gone at the source, null in the lake.
    v7 = evolve(TABLE, "id", BASE, lake_types(v6), v6)
    bare = SourceColumn("channel", "text", True, 6)
    v8 = evolve(TABLE, "id", [*BASE, bare], lake_types(v7), v7)
    assert to_backfill(lake_types(v7), v7, v8) == (v8.column("channel"),)
    assert v8.column("channel").missing_value is None
    assert raw_missing_value(v8.column("channel"), TABLE) is None
    # A column without a default, or a new table: nothing to fill.
    plain = evolve(TABLE, "id", [*BASE, SourceColumn("note", "text")], lake_types(v1), v1)
    assert to_backfill(lake_types(v1), v1, plain) == ()
    fresh = evolve(TABLE, "id", [*BASE, added], None)
    assert to_backfill(None, None, fresh) == () and fresh.column("channel").missing_value


def test_each_kinds_spark_types_are_spark_parsed_once(spark):
    from pyspark.sql.types import _parse_datatype_string

    names = {t for k in KINDS.values() for t in (k.raw, k.lake, k.image)}
    for name in names:
        assert spark_type(name) == _parse_datatype_string(name), name
        assert spark_type(name) is spark_type(name), name  # the JVM is asked once per name
    schema = initial(TABLE, "id", BASE)
    assert schema.raw_struct() == schema.raw_struct()
    assert [f.dataType for f in schema.raw_struct([("x", "decimal(10,2)")]).fields][-1] == (
        _parse_datatype_string("decimal(10,2)")
    )


def test_a_composite_key_is_every_column_of_it():
    source = [*BASE, SourceColumn("line", "smallint", False)]
    v1 = initial(TABLE, ("id", "line"), source)
    assert v1.keys == ("id", "line")
    # Recorded as a list; a schema recorded with one key column as a string still reads.
    data = json.loads(json.dumps(v1.to_json()))
    assert data["key"] == ["id", "line"] and LakeSchema.from_json(data) == v1
    single = initial(TABLE, "id", BASE).to_json()
    assert single["key"] == "id" and LakeSchema.from_json(single).keys == ("id",)
    with pytest.raises(SchemaChangeError, match="key column 'line' is gone"):
        evolve(TABLE, ("id", "line"), BASE, lake_types(v1), v1)
    with pytest.raises(SchemaChangeError, match="on its key column"):
        evolve(TABLE, ("id", "line"), [*BASE, SourceColumn("line", "text")], lake_types(v1), v1)
    with pytest.raises(SchemaChangeError, match="no key column 'nope'"):
        initial(TABLE, ("id", "nope"), source)
    # The key as the table was written with it, in its order: another one stops.
    for other in (("line", "id"), "id"):
        stop = r"declared key .* is not the one .*\(id, line\)"
        with pytest.raises(SchemaChangeError, match=stop):
            evolve(TABLE, other, source, lake_types(v1), v1)
