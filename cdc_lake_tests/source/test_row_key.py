"""The rule that decides whether a declared key identifies the source's rows and reaches the lake
in every change (``cdc_lake/source/row_key.py``), over catalog descriptions; the catalog query
itself runs on the real PostgreSQL in ``test_preflight.py``."""

from __future__ import annotations

import pytest

from cdc_lake.source.captured import CapturedTable
from cdc_lake.source.row_key import UniqueIndex, refusal

PK = UniqueIndex("datalake.t_pkey", ("id",), primary=True)
CODE = UniqueIndex("datalake.t_code", ("code",))


def table(key: str | tuple[str, ...] = "id", identity: str = "full") -> CapturedTable:
    return CapturedTable(source="datalake.t", key=key, ddl_file="", replica_identity=identity)  # type: ignore[arg-type]


@pytest.mark.parametrize("identity", ["d", "f", "n", "i"])
def test_a_primary_key_declared_full_is_taken_whatever_the_identity(identity: str):
    assert refusal(table(), [PK, CODE], identity) is None


def test_the_key_matches_in_any_column_order():
    both = UniqueIndex("datalake.t_pkey", ("a", "b"), primary=True)
    assert refusal(table(("b", "a")), [both], "d") is None
    why = refusal(table("a"), [both], "d")
    assert why is not None and "primary key is (a, b)" in why and "key=('a', 'b')" in why


def test_a_unique_index_on_not_null_columns_is_a_key():
    assert refusal(table("code"), [CODE], "d") is None  # FULL will be set
    assert refusal(table("code"), [PK, CODE], "f") is None
    # Declared default: the identity must already carry it.
    chosen = UniqueIndex("datalake.t_code", ("code",), replica_identity=True)
    assert refusal(table("code", "default"), [chosen], "i") is None
    assert refusal(table("code", "default"), [CODE], "f") is None


def test_a_default_identity_that_does_not_carry_the_key_is_refused():
    why = refusal(table("code", "default"), [CODE], "d")
    assert why is not None
    assert "REPLICA IDENTITY DEFAULT carries nothing" in why and "Nothing was published" in why
    assert "ALTER TABLE datalake.t REPLICA IDENTITY USING INDEX t_code" in why
    why = refusal(table("code", "default"), [PK, CODE], "d")
    assert why is not None and "carries its primary key (id)" in why
    other = UniqueIndex("datalake.t_other", ("other",), replica_identity=True)
    why = refusal(table("code", "default"), [CODE, other], "i")
    assert why is not None and "USING INDEX carries another index's columns" in why
    why = refusal(table("id", "default"), [PK], "n")
    assert why is not None and "REPLICA IDENTITY NOTHING carries nothing" in why
    assert refusal(table("id", "default"), [PK], "d") is None


def test_a_unique_index_that_does_not_identify_a_row_is_refused():
    nullable = UniqueIndex("datalake.t_code", ("code",), not_null=False)
    why = refusal(table("code"), [PK, nullable], "d")
    assert why is not None and "unique index datalake.t_code on (code) may hold NULL" in why
    assert "ALTER TABLE datalake.t ALTER COLUMN code SET NOT NULL" in why
    partial = UniqueIndex("datalake.t_code", ("code",), plain=False)
    why = refusal(table("code"), [partial], "d")
    assert why is not None and "is partial, on expressions or deferrable" in why


def test_no_key_at_all_and_a_key_the_source_does_not_hold_unique():
    why = refusal(table(), [], "d")
    assert why is not None and "datalake.t has no primary key, nor a unique index" in why
    assert "ALTER TABLE datalake.t ADD PRIMARY KEY (id)" in why
    why = refusal(table("name"), [PK, CODE], "d")
    assert why is not None and "declared with key (name) but its primary key is (id)" in why
    assert "declare key='id'" in why
