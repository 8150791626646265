"""The peer benchmark once at its smoke size (2,000 events, 2 batches, one repetition of each
side; A2, the upsert with Hudi's change feed instead of change sets; B2, Delta's MERGE with its
change data feed on):
Hudi, Delta MERGE, Iceberg MERGE and the Parquet floor end with the generator's latest change
per key, and the report has every figure.
No timing is asserted. Measured: 167 s with A2 and B2, the stack's start (20 s) included,
on an idle 2-core machine; 19 minutes at load average ~17 before A2 and B2. The worker's own
Spark driver and each format's first write (no warm-up at this size) are most of it.
"""

from __future__ import annotations

import inspect
import re

import pytest

from bench import peers_large as PL
from bench.__main__ import PEERS_KNOBS, SCALE_KNOBS, cli_parser, knobs_for, run, worker_knobs
from bench.harness import rotation
from bench.peers import (
    SIDE_NAMES,
    WARM_UP_ROUNDS,
    bench_peers,
    expected_state,
    run_large,
    variant_table,
    warm_up,
)
from bench.peers_large import LargeTable
from bench.scale import bench_scale
from bench.synthetic import OUTBOX_SCHEMA
from cdc_lake.stack import LocalStack


def test_each_repetition_starts_one_side_later():
    sides = ("A", "A2", "B", "C", "D")
    orders = [rotation(sides, rep) for rep in range(len(sides) + 1)]
    assert [o[0] for o in orders] == ["A", "A2", "B", "C", "D", "A"]
    assert orders[1] == ("A2", "B", "C", "D", "A")
    assert all(sorted(o) == sorted(sides) for o in orders)


class _Table:
    """A side's table for ``run_large`` without Spark: each call recorded as (side, table, first
    object); the sides in ``failing`` raise."""

    def __init__(self, calls: list[tuple[str, str, str]], side: str, name: str, failing=()):
        self.calls, self.side, self.name, self.failing = calls, side, name, failing

    def ingest(self, objects: list[str]) -> None:
        if self.side in self.failing:
            raise RuntimeError(f"no {self.side} here")
        self.calls.append((self.side, self.name, objects[0]))

    load = ingest

    def snapshot(self) -> str:
        return self.side


class _Spark:
    def stop(self) -> None:
        pass


def _run_large(sides, side_of, chunks: int, failed=None) -> dict:
    return run_large(
        sides,
        side_of,
        [[f"load{i}"] for i in range(chunks)],
        {"b0": "batch0"},
        {"batches": [{"key": "b0", "kind": "1 change"}]},
        lambda snapshot: {"rows": 1},
        lambda table: (1, 2, 3),
        _Spark(),
        failed,
    )


def test_the_large_table_load_rotates_the_sides_per_chunk():
    # The load rotates as the batches do, so a drift of the machine's load spreads over the sides.
    calls: list[tuple[str, str, str]] = []
    sides = ("A", "B", "C")
    out = _run_large(sides, lambda side, name: _Table(calls, side, name), 3)
    loads = [(side, obj) for side, _, obj in calls if obj.startswith("load")]
    assert [side for side, _ in loads[0::3]] == ["A", "B", "C"]  # who opens each chunk
    assert loads[:3] == [("A", "load0"), ("B", "load0"), ("C", "load0")]
    assert loads[3:6] == [("B", "load1"), ("C", "load1"), ("A", "load1")]
    assert all(out[s]["load_s"] >= 0 and len(out[s]["batches"]) == 1 for s in sides)


def test_each_side_warms_up_on_a_throwaway_table_and_a_failed_side_is_left_out_of_the_load():
    # The JVM's first write of a format costs 20-40 s: it goes to a throwaway table, untimed.
    calls: list[tuple[str, str, str]] = []
    sides = ("A", "B", "C")

    def side_of(side: str, name: str) -> _Table:
        # B fails its warm-up only: were it not left out, it would load and take the batch.
        return _Table(calls, side, name, failing=("B",) if name == "warmup" else ())

    failed, rounds = warm_up(sides, side_of, ["first", "second"])
    assert calls == [("A", "warmup", "first"), ("C", "warmup", "first")]  # one round, unmeasured
    assert list(failed) == ["B"] and "no B here" in failed["B"] and len(rounds) == 1

    out = _run_large(sides, side_of, 1, failed)
    assert out["B"]["error"] == failed["B"] and out["B"]["batches"] == []
    assert not any(side == "B" for side, _, _ in calls)
    assert [c for c in calls[2:] if c[2] == "load0"] == [
        ("A", "large", "load0"),
        ("C", "large", "load0"),
    ]
    assert all(len(out[s]["batches"]) == 1 for s in ("A", "C"))


def test_the_warm_up_goes_on_until_the_jit_is_quiet():
    # Each round takes 10 s (a clock that ticks 10 s per call pair). The driver's JIT compiled
    # 9 s in round 1, then 3 s (30%: not quiet yet), then 2 s (20%: under 25%, quiet): three
    # rounds, each a new file into the same throwaway table per side; the timed reps follow.
    calls: list[tuple[str, str, str]] = []
    jit = iter([0.0, 9.0, 9.0, 12.0, 12.0, 14.0, 14.0, 14.0])
    ticks = iter(float(t) for t in range(0, 1000, 5))

    def counters() -> dict[str, float]:
        return {"jit_s": next(jit), "gc_s": 0.0}

    files = [f"f{i}" for i in range(20)]
    failed, rounds = warm_up(("A", "B"), lambda s, n: _Table(calls, s, n), files, counters,
                             clock=lambda: 2 * next(ticks))  # fmt: skip
    assert not failed
    assert rounds == [{"s": 10.0, "jit_s": j} for j in (9.0, 3.0, 2.0)]
    assert calls == [(s, "warmup", f) for f in ("f0", "f1", "f2") for s in ("A", "B")]

    # A JIT that never quiets stops at the cap (halving each round, but never under 25%).
    calls.clear()
    cumulative = [2e9 - 2e9 / 2 ** (i + 1) for i in range(WARM_UP_ROUNDS)]
    halving = iter([0.0] + [x for x in cumulative for _ in (0, 1)])
    _, rounds = warm_up(("A",), lambda s, n: _Table(calls, s, n), files,
                        lambda: {"jit_s": next(halving)})  # fmt: skip
    assert len(rounds) == WARM_UP_ROUNDS == len(calls)


def test_peers_end_equal_and_report_every_figure(local_stack: LocalStack):
    # A2: the same upsert with one Hudi option changed, alternated with the others.
    variant = {"cdc_lake.change_sets": "false", "cdc_lake.change_feed": "true"}
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
    # The change logs: change sets by default, compressed; A2's Hudi feed instead, which logs
    # every row twice, uncompressed. (B2's table has Delta's feed on, which the worker checks,
    # but at this size both batches only insert, and Delta logs only updates and deletes.)
    feed = {x: figures[f"change log size, {SIDE_NAMES[x]}, {label}"].value for x in SIDE_NAMES}
    assert 0 < feed["A"] < feed["A2"], feed
    assert feed["B"] == feed["C"] == feed["D"] == 0, feed
    for ratio in ("A/B", "A/C", "A/D", "A2/B", "A2/C", "A2/D", "A/B2", "B2/B"):
        assert figures[f"ratio {ratio}, {label}"].value > 0
    knob = "cdc_lake.change_sets=false, cdc_lake.change_feed=true"
    paired = figures[f"ratio A2/A ({knob}), {label}"]
    assert paired.value > 0 and paired.note == "same run, alternated"
    # From Spark's event log: each side's batches and their slowest stages with task counts,
    # and the file groups of A's table (a COPY_ON_WRITE rewrite runs one task per group).
    for side in SIDE_NAMES.values():
        batch = figures[f"batch, {side}, {label}"]
        busy = float(batch.note.removeprefix("of which some Spark stage ran ").removesuffix(" s"))
        assert 0 < busy <= batch.value, batch
        stage = figures[f"stage 1 by time per batch, {side}, {label}"]
        assert re.fullmatch(r"[1-9]\d* tasks?: .+", stage.note), stage
    assert figures[f"base file groups, {SIDE_NAMES['A']}, {label}"].value >= 1


def test_the_large_table_mode_warms_every_side_up_and_ends_equal(local_stack: LocalStack):
    # The large-table mode runs a worker of its own: each side writes a throwaway table first
    # (the JVM's first write of its format), then loads the table and takes the batches.
    large = LargeTable(2_000, sizes=(10,), per_kind=1, distributions=("uniform",))
    s3 = local_stack.service("s3").client()  # type: ignore[attr-defined]
    lake = local_stack.settings.lake_bucket

    def keys() -> set[str]:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=lake, Prefix="bench-peers/")
        return {o["Key"] for page in pages for o in page.get("Contents", [])}

    before = keys()
    figures = {
        f.name: f
        for f in bench_peers(local_stack, s3, (), 1, lambda _: None, warm_up=True, large=large)
    }
    label = "2,000 orders"
    note = figures[f"large table: live rows, {label}"].note
    assert note == "A = B = C = D = the generator's latest per key", figures
    for side in ("A", "B", "C", "D"):
        name = f"large table: {SIDE_NAMES[side]}, 10 changes, uniform, into {label}"
        assert figures[name].value > 0, name
        # Each batch's stages, from Spark's event log, by the job group of its side and kind.
        stage = figures[f"large table: slowest stage, {SIDE_NAMES[side]}, 10 changes, uniform, "
                        f"into {label}"]  # fmt: skip
        assert re.match(r"[1-9]\d* tasks?: .+; some Spark stage ran \d", stage.note), stage
    written = keys() - before
    for table in ("/a-warmup/", "/b-warmup/", "/iceberg/bench/t_warmup/", "/d-warmup/"):
        assert any(table in k for k in written), table


def test_a_variant_sets_hudi_options_and_the_table_configs_fields():
    table = variant_table(
        "s3a://b/t",
        {"cdc_lake.change_sets": "false", "cdc_lake.change_feed": "true", "hoodie.x": "1"},
    )
    assert (table.change_sets, table.change_feed) == (False, True)
    default = variant_table("s3a://b/t", {}).write_options(schema=OUTBOX_SCHEMA)
    assert "hoodie.table.cdc.enabled" not in default
    assert table.extra_options == {"hoodie.x": "1"}
    assert table.write_options(schema=OUTBOX_SCHEMA)["hoodie.table.cdc.enabled"] == "true"


def test_the_large_table_batches_and_the_generators_answer():
    large = LargeTable(2_000, sizes=(10, 100), per_kind=2)
    batches = PL.plan(large)
    # The kinds interleave, and every change has its own sequence number.
    assert [b.kind for b in batches[:4]] == [
        "10 changes, uniform", "10 changes, recent", "100 changes, uniform", "100 changes, recent"
    ]  # fmt: skip
    assert [b.first for b in batches] == [0, 10, 20, 120, 220, 230, 240, 340]
    for b in batches:
        orders = PL.changed_orders(large.orders, b)
        assert len(set(orders)) == b.size and orders == PL.changed_orders(large.orders, b)
        if b.distribution == "recent":  # the newest 5% (100 orders) only
            assert min(orders) > large.orders - 100
    # The answer replays the events themselves: the last change per order, deletes removed.
    last: dict[int, tuple[int, bool]] = {
        ev["order_id"]: (ev["__lsn"], False) for _, ev in PL.load_events(large.orders)
    }
    for b in batches:
        for ev in PL.batch_events(large.orders, b):
            last[ev["order_id"]] = (ev["__lsn"], ev["__deleted"] == "true")
    want = {o: lsn for o, (lsn, gone) in last.items() if not gone}
    assert PL.expected(large.orders, batches) == want
    assert len(want) < large.orders  # some orders ended deleted
    with pytest.raises(ValueError, match="distribution"):
        LargeTable(100, distributions=("zipf",))


def test_each_worker_benchmark_takes_the_cli_knobs_named_for_it():
    """`python -m bench --only scale` passed scale the peers' `large` knob (a TypeError):
    each benchmark's knob names are arguments of its function, and every name is one of them."""
    cli = worker_knobs(cli_parser().parse_args(["--large-table", "100000"]))
    for names, fn in ((SCALE_KNOBS, bench_scale), (PEERS_KNOBS, bench_peers)):
        knobs = knobs_for(names, cli)
        assert set(knobs) == set(names)
        inspect.signature(fn).bind_partial(**knobs)  # raises on a knob it does not take
    assert set(SCALE_KNOBS) | set(PEERS_KNOBS) == set(cli)
