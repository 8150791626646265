"""The sample-data generator: Northwind's size at scale 1, deterministic, and scalable."""

from __future__ import annotations

from cdc_lake.source.generator import NorthwindGenerator


def _counts(gen: NorthwindGenerator) -> dict[str, int]:
    return {t.name: sum(1 for _ in t.rows()) for t in gen.tables()}


def test_default_size_is_northwinds():
    counts = _counts(NorthwindGenerator())
    assert counts["customers"] == 91
    assert counts["products"] == 77
    assert counts["employees"] == 9
    assert counts["orders"] == 829
    assert 2050 <= counts["order_details"] <= 2250


def test_same_seed_same_rows_other_seed_other_rows():
    a = [list(t.rows()) for t in NorthwindGenerator(seed=1).tables()]
    b = [list(t.rows()) for t in NorthwindGenerator(seed=1).tables()]
    c = [list(t.rows()) for t in NorthwindGenerator(seed=2).tables()]
    assert a == b
    assert a != c


def test_order_ids_follow_northwind_and_lines_reference_orders():
    gen = NorthwindGenerator()
    tables = {t.name: list(t.rows()) for t in gen.tables()}
    ids = [o[0] for o in tables["orders"]]
    assert ids[0] == 10248 and ids[-1] == 11077 and 11075 not in ids
    assert len(set(ids)) == len(ids)
    assert {d[0] for d in tables["order_details"]} <= set(ids)
    keys = [(d[0], d[1]) for d in tables["order_details"]]
    assert len(set(keys)) == len(keys)  # (order_id, product_id) is the primary key
    customers = {c[0] for c in tables["customers"]}
    assert {o[1] for o in tables["orders"]} <= customers


def test_scale_multiplies_orders_and_customers():
    gen = NorthwindGenerator(scale=10)
    assert gen.n_orders == 8290
    counts = _counts(gen)
    assert counts["orders"] == 8290 and counts["customers"] == 910
    assert 20500 <= counts["order_details"] <= 22500
