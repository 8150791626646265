"""The peer benchmark once at its smoke size (2,000 events, 2 batches, one repetition of each
side; A2, the upsert with the change feed off; B2, Delta's MERGE with its change data feed on):
Hudi, Delta MERGE, Iceberg MERGE and the Parquet floor end with the generator's latest change
per key, and the report has every figure.
No timing is asserted. Measured: 167 s with A2 and B2, the stack's start (20 s) included,
on an idle 2-core machine; 19 minutes at load average ~17 before A2 and B2. The worker's own
Spark driver and each format's first write (no warm-up at this size) are most of it.
"""

from __future__ import annotations

from bench.__main__ import run
from bench.harness import rotation
from bench.peers import SIDE_NAMES, expected_state
from cdc_lake.stack import LocalStack


def test_each_repetition_starts_one_side_later():
    sides = ("A", "A2", "B", "C", "D")
    orders = [rotation(sides, rep) for rep in range(len(sides) + 1)]
    assert [o[0] for o in orders] == ["A", "A2", "B", "C", "D", "A"]
    assert orders[1] == ("A2", "B", "C", "D", "A")
    assert all(sorted(o) == sorted(sides) for o in orders)


def test_peers_end_equal_and_report_every_figure(local_stack: LocalStack):
    # A2: the same upsert with one Hudi option changed, alternated with the others.
    variant = {"hoodie.table.cdc.enabled": "false"}
    report = run(
        local_stack,
        ["peers"],
        smoke=True,
        reps=1,
        scale_knobs={"variant_options": variant, "delta_cdf": True},
    )
    figures = {f.name: f for f in report.figures if f.benchmark == "peers"}
    label = "2,000 events"
    assert not any(f.note.startswith("worker failed") for f in figures.values()), figures

    # The state the generator itself says is latest per key, counted here without Spark: the
    # worker checked each table's digest of (order_id, cdc_lsn) and full-row hash against it.
    expected = expected_state(2_000)
    live = figures[f"live rows, {label}"]
    assert live.value == len(expected)
    assert live.note == "A = A2 = B = B2 = C = D = the generator's latest per key", live.note
    orders = max(expected) if expected else 0
    assert 0 < len(expected) < orders  # some orders did end deleted

    timed = [f for f in figures.values() if f.unit == "s"]
    assert all(f.value > 0 for f in timed)
    for side in SIDE_NAMES.values():
        assert any(n.startswith(f"{side}, {label}") for n in figures), side
        size = figures[f"table size, {side}, {label}"]
        assert size.value > 0 and size.note.endswith(" files")
        assert figures[f"read final snapshot, {side}, {label}"].value > 0
        assert any(n.startswith("one more batch") and side in n for n in figures), side
    # The change logs: Hudi's by default, none where the feed is off. (B2's table has Delta's
    # feed on, which the worker checks, but at this size both batches only insert, and Delta
    # logs only updates and deletes.)
    feed = {x: figures[f"change log size, {SIDE_NAMES[x]}, {label}"].value for x in SIDE_NAMES}
    assert feed["A"] > 0, feed
    assert feed["A2"] == feed["B"] == feed["C"] == feed["D"] == 0, feed
    for ratio in ("A/B", "A/C", "A/D", "A2/B", "A2/C", "A2/D", "A/B2", "B2/B"):
        assert figures[f"ratio {ratio}, {label}"].value > 0
    paired = figures[f"ratio A2/A (hoodie.table.cdc.enabled=false), {label}"]
    assert paired.value > 0 and paired.note == "same run, alternated"
