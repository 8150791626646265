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
    check_policy,
    initial,
)
from cdc_lake.lake.tables import declared_schema
from cdc_lake.source.captured import CUSTOMERS, CapturedTable

PEOPLE = CapturedTable(
    source="datalake.people", key="id", ddl_file="", exclude=("fax",), hashed=("phone",)
)
COLUMNS = [
    SourceColumn("id", "integer", False, 1),
    SourceColumn("phone", "character varying(24)", True, 2),
    SourceColumn("fax", "character varying(24)", True, 3),
    SourceColumn("city", "text", True, 4),
]


def written(table: CapturedTable = PEOPLE) -> LakeSchema:
    """The schema a lake table written under ``table``'s policies records."""
    return replace(
        initial(table.source, table.key, captured_columns(table, COLUMNS)), excluded=table.exclude
    )


def test_excluded_columns_are_left_out_and_hashed_ones_are_of_their_own_kind():
    columns = captured_columns(PEOPLE, COLUMNS)
    assert [c.name for c in columns] == ["id", "phone", "city"]
    assert [c.kind for c in columns] == ["int", "hashed", "text"]
    schema = written()
    assert schema.digest_signature() == ["city:text", "id:int", "phone:hashed"]
    assert LakeSchema.from_json(schema.to_json()) == schema  # recorded in each commit
    # The customers' declaration, as sql/ creates the table.
    customers = declared_schema(CUSTOMERS)
    assert "fax" not in customers.names and customers.column("phone").kind == "hashed"
    assert customers.excluded == ("fax",)


def test_a_policy_on_a_missing_or_non_text_column_is_an_error():
    typo = replace(PEOPLE, hashed=("phnoe",))
    with pytest.raises(SchemaChangeError, match=r"datalake.people.phnoe: .* no such column"):
        captured_columns(typo, COLUMNS)
    assert [c.name for c in captured_columns(typo, COLUMNS, strict=False)] == [
        "id", "phone", "city"
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
    with pytest.raises(SchemaChangeError, match=r"people.email: declared hashed, but it was added"):
        captured_columns(replace(PEOPLE, hashed=("phone", "email")), added)
