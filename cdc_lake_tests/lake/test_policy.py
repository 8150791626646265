"""Column policies (``cdc_lake/lake/schema/policy.py``): the source's columns as the lake takes
them, and a policy changed after the lake table was written, which stops the refresh."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cdc_lake.lake.schema import (
    LakeSchema,
    SchemaChangeError,
    SourceColumn,
    captured_columns,
    captured_schema,
    check_policy,
)
from cdc_lake.lake.tables import declared_schema
from cdc_lake.source.captured import CUSTOMERS, OUTBOX, CapturedTable

PEOPLE = CapturedTable(
    source="datalake.people", key="id", ddl_file="", exclude=("fax",), hashed=("phone",)
)
COLUMNS = [
    SourceColumn("id", "integer", False, 1),
    SourceColumn("phone", "character varying(24)", True, 2),
    SourceColumn("fax", "character varying(24)", True, 3),
    SourceColumn("city", "text", True, 4),
    SourceColumn("card", "jsonb", True, 5),
]


def written(table: CapturedTable = PEOPLE) -> LakeSchema:
    """The schema a lake table written under ``table``'s policies records."""
    return captured_schema(table, captured_columns(table, COLUMNS))


def test_excluded_columns_are_left_out_and_hashed_ones_are_of_their_own_kind():
    columns = captured_columns(PEOPLE, COLUMNS)
    assert [c.name for c in columns] == ["id", "phone", "city", "card"]
    assert [c.kind for c in columns] == ["int", "hashed", "text", "json"]
    schema = written()
    assert schema.digest_signature() == ["card:json", "city:text", "id:int", "phone:hashed"]
    assert LakeSchema.from_json(schema.to_json()) == schema  # recorded in each commit
    # The customers' declaration, as sql/ creates the table.
    customers = declared_schema(CUSTOMERS)
    assert "fax" not in customers.names and customers.column("phone").kind == "hashed"
    assert customers.excluded == ("fax",)
    # The outbox's customer JSON carries the same data: its fields are under the same policy.
    outbox = declared_schema(OUTBOX)
    assert outbox.field_policies("customer") == (("fax",), ("phone",))
    assert outbox.field_policies("employee") == ((), ("home_phone",))
    assert outbox.field_policies("shipper") == ((), ())
    assert LakeSchema.from_json(outbox.to_json()) == outbox


def test_field_policies_name_a_jsonb_column_and_one_top_level_field():
    fields = replace(PEOPLE, exclude=("fax", "card.cvc"), hashed=("phone", "card.number"))
    schema = written(fields)
    assert schema.field_policies("card") == (("cvc",), ("number",))
    assert schema.hashed_fields == ("card.number",) and schema.excluded == ("fax", "card.cvc")
    assert [c.kind for c in schema.columns] == ["int", "hashed", "text", "json"]
    with pytest.raises(SchemaChangeError, match=r"people.city: a policy names a field of it, but "
                                                r"it is text: only jsonb"):  # fmt: skip
        captured_columns(replace(PEOPLE, hashed=("city.zip",)), COLUMNS)
    with pytest.raises(SchemaChangeError, match=r"people.cards.number: .* no column cards"):
        captured_columns(replace(PEOPLE, hashed=("cards.number",)), COLUMNS)
    added = [*COLUMNS[:4], SourceColumn("card", "jsonb", True, 5, missing_value="{}")]
    with pytest.raises(SchemaChangeError, match=r"people.card: .* added with a default.*"
                                                r"SET card = card .* VACUUM FULL datalake.people"):
        captured_columns(fields, added)
    for bad, said in (
        ({"hashed": ("card.a.b",)}, "<jsonb column>.<top-level field>"),
        ({"hashed": ("card.",)}, "<jsonb column>.<top-level field>"),
        ({"exclude": ("card",), "hashed": ("card.number",)}, "one on a field of it"),
        ({"exclude": ("id.x",)}, "the key or a partition source"),
    ):
        with pytest.raises(ValueError, match=said):
            replace(PEOPLE, **{"exclude": (), "hashed": (), **bad})


def test_a_changed_field_policy_stops_naming_the_field():
    fields = replace(PEOPLE, exclude=("fax", "card.cvc"), hashed=("phone", "card.number"))
    check_policy(fields, written(fields))
    cases = {
        "card.number is no longer hashed, but the lake holds its hashes": replace(
            fields, hashed=("phone",)
        ),
        "card.cvc is no longer excluded": replace(fields, exclude=("fax",)),
        "card.pin is now hashed, but the lake holds its plain values": replace(
            fields, hashed=("phone", "card.number", "card.pin")
        ),
        "card.pin is now excluded": replace(fields, exclude=("fax", "card.cvc", "card.pin")),
    }
    for said, changed in cases.items():
        with pytest.raises(SchemaChangeError, match=f"a column policy changed: {said}"):
            check_policy(changed, written(fields))
    # A lake written before field policies existed: both fields named.
    with pytest.raises(SchemaChangeError, match="card.cvc is now excluded.*card.number is now"):
        check_policy(fields, written())
    # The jsonb column dropped at the source: a drop, not a policy change.
    check_policy(replace(fields, exclude=("fax",), hashed=("phone",)), written(fields),
                 source=["id", "phone", "city"])  # fmt: skip


def test_a_policy_on_a_missing_or_non_text_column_is_an_error():
    typo = replace(PEOPLE, hashed=("phnoe",))
    with pytest.raises(SchemaChangeError, match=r"datalake.people.phnoe: .* no column phnoe"):
        captured_columns(typo, COLUMNS)
    assert [c.name for c in captured_columns(typo, COLUMNS, strict=False)] == [
        "id", "phone", "city", "card"
    ]  # fmt: skip
    with pytest.raises(SchemaChangeError, match=r"datalake.people.id: declared hashed, but it"):
        captured_columns(replace(PEOPLE, key="city", hashed=("id",)), COLUMNS)


def test_a_changed_policy_stops_naming_the_column():
    check_policy(PEOPLE, None)  # a new table
    check_policy(PEOPLE, written())  # unchanged
    cases = {
        "phone is no longer hashed": replace(PEOPLE, hashed=()),
        "fax is no longer excluded": replace(PEOPLE, exclude=()),
        "city is now hashed": replace(PEOPLE, hashed=("phone", "city")),
        "city is now excluded, but the lake holds its values": replace(
            PEOPLE, exclude=("fax", "city")
        ),
    }
    for said, changed in cases.items():
        with pytest.raises(SchemaChangeError, match=f"a column policy changed: {said}") as e:
            check_policy(changed, written())
        assert "Nothing was committed" in str(e.value) and "column-policies.md" in str(e.value)
    # A table written before policies existed, now declared with them: both columns named.
    with pytest.raises(SchemaChangeError, match="fax is now excluded.*phone is now hashed"):
        check_policy(PEOPLE, written(replace(PEOPLE, exclude=(), hashed=())))


def test_a_column_dropped_at_the_source_is_no_policy_change():
    """Phone and fax dropped at the source, and so out of the declaration: a drop (the lake
    keeps the hashes, null from then on), not a policy change."""
    gone = replace(PEOPLE, exclude=(), hashed=())
    check_policy(gone, written(), source=["id", "city"])
    with pytest.raises(SchemaChangeError, match="phone is no longer hashed"):
        check_policy(gone, written(), source=["id", "phone", "city"])


def test_a_hashed_column_added_with_a_default_is_refused():
    """Rows stored before read as the default, which no change event carries hashed."""
    added = [*COLUMNS, SourceColumn("email", "text", True, 5, missing_value="none")]
    with pytest.raises(SchemaChangeError, match=r"people.email: declared hashed, but it was added"
                                                r".* VACUUM FULL datalake.people"):
        captured_columns(replace(PEOPLE, hashed=("phone", "email")), added)
