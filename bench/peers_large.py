"""Peers in the large-table regime: small batches of changes into a table that already holds
N orders, the regime in which an indexed upsert should cost what the change costs and a MERGE
what the table holds (issue 25, item 3).

Input: N orders, one insert each (the load, written once and ingested by every side untimed,
in chunks, each chunk starting one side later, after every side's warm-up write), then
batches of changes, each one raw object of its own after the load:

- ``size`` changes (1,000 and 10,000 by default) to distinct existing orders, each newer than
  every event before it; one change in ``DELETE_EVERY`` deletes its order;
- ``uniform``: the orders drawn from the whole table; ``recent``: from the newest
  ``RECENT_SHARE`` of the orders (the usual CDC shape: recent orders change, old ones rest);
- the kinds interleaved (1k uniform, 1k recent, 10k uniform, ... then again), so a drift of
  the machine's load spreads over all of them.

Each batch is ingested by A, B, C and D (``bench/peers.py``) in turn, each batch starting one side
later, and timed alone. At the end every side's live rows must equal the generator's latest
change per order (``expected``).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.scale import EVENTS_PER_FILE, PARTITIONS, TOPIC

DISTRIBUTIONS = ("uniform", "recent")
RECENT_SHARE = 0.05  # "recent": the newest 5% of the orders
DELETE_EVERY = 100  # one change in this many deletes its order
LOAD_TS, CHANGE_TS = 1_700_000_000_000, 1_800_000_000_000
CHANGE_LSN = 10**10  # above every load LSN: a change is newer than the load
# The batches go to the topic's last partition, after the load: a reader that takes the next
# k objects in key order (A's checkpoint plan) meets the load first, then the batches in order.
CHANGE_PARTITION = PARTITIONS - 1


@dataclass(frozen=True)
class LargeTable:
    """What ``python -m bench --only peers --large-table N`` runs."""

    orders: int
    sizes: tuple[int, ...] = (1_000, 10_000)
    per_kind: int = 3  # batches of each (size, distribution)
    distributions: tuple[str, ...] = DISTRIBUTIONS
    load_chunk_files: int = 40  # the load is ingested this many raw objects at a time

    def __post_init__(self) -> None:
        bad = set(self.distributions) - set(DISTRIBUTIONS)
        if bad:
            raise ValueError(f"large table: unknown distribution(s) {sorted(bad)}")
        if not self.sizes or max(self.sizes) > self.orders:
            raise ValueError(
                f"large table: batch sizes {self.sizes} must be given and at most the "
                f"{self.orders:,} orders"
            )


@dataclass(frozen=True)
class ChangeBatch:
    size: int
    distribution: str
    index: int  # 0.. within its (size, distribution)
    first: int  # the sequence number of its first change (its LSNs and timestamps follow)

    @property
    def kind(self) -> str:
        return f"{self.size:,} changes, {self.distribution}"


def plan(large: LargeTable) -> list[ChangeBatch]:
    """The batches in the order they are ingested: the kinds interleaved."""
    out: list[ChangeBatch] = []
    first = 0
    for index in range(large.per_kind):
        for size in large.sizes:
            for dist in large.distributions:
                out.append(ChangeBatch(size, dist, index, first))
                first += size
    return out


def changed_orders(n_orders: int, batch: ChangeBatch) -> list[int]:
    """The batch's distinct orders, drawn as its distribution says (deterministic)."""
    rng = random.Random(f"{batch.size}-{batch.distribution}-{batch.index}")
    if batch.distribution == "uniform":
        lo = 1
    else:
        lo = n_orders - max(batch.size, int(n_orders * RECENT_SHARE)) + 1
    return rng.sample(range(lo, n_orders + 1), batch.size)


def _items(order_id: int, n: int) -> list[dict[str, Any]]:
    return [
        {"product_id": 1 + (order_id + k) % 77, "unit_price": 10.0 + k,
         "quantity": 1 + (n + k) % 9, "discount": 0.05 * (k % 2)}
        for k in range(1 + order_id % 4)
    ]  # fmt: skip


def load_events(n_orders: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(partition, event): one insert per order, in order."""
    from bench.synthetic import event

    for i in range(n_orders):
        o = i + 1
        ev = event(o, ts=LOAD_TS + i, lsn=i + 1, op="c", items=_items(o, i))
        yield o % PARTITIONS, ev


def batch_events(n_orders: int, batch: ChangeBatch) -> list[dict[str, Any]]:
    from bench.synthetic import event

    out = []
    for j, o in enumerate(changed_orders(n_orders, batch)):
        n = batch.first + j
        deleted = j % DELETE_EVERY == DELETE_EVERY - 1
        out.append(
            event(o, ts=CHANGE_TS + n, lsn=CHANGE_LSN + n, op="d" if deleted else "u",
                  deleted=deleted, shipped_date=10_000 + n % 300, items=_items(o, n))
        )  # fmt: skip
    return out


def expected(n_orders: int, batches: list[ChangeBatch]) -> dict[int, int]:
    """The generator's own answer: order -> LSN of its latest change, for live orders."""
    last = {o: o for o in range(1, n_orders + 1)}  # the load: order o has LSN o
    gone: set[int] = set()
    for b in batches:
        for j, o in enumerate(changed_orders(n_orders, b)):
            last[o] = CHANGE_LSN + b.first + j
            if j % DELETE_EVERY == DELETE_EVERY - 1:
                gone.add(o)
            else:
                gone.discard(o)
    return {o: lsn for o, lsn in last.items() if o not in gone}


def write(
    client: Any, bucket: str, prefix: str, large: LargeTable, say: Callable[[str], None]
) -> tuple[int, list[tuple[ChangeBatch, str]]]:
    """The load's raw objects, then one object per change batch: the number of load objects
    and each batch with its object key."""
    offsets = dict.fromkeys(range(PARTITIONS), 0)
    buffers: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    files = 0
    t0 = time.monotonic()

    def key(p: int) -> str:
        return f"{prefix}{TOPIC}/partition={p}/{TOPIC}+{p}+{offsets[p]:020d}.jsonl"

    with ThreadPoolExecutor(max_workers=4) as pool:
        pending = []

        def put(p: int, lines: list[str]) -> str:
            k = key(p)
            body = ("\n".join(lines) + "\n").encode()
            pending.append(pool.submit(client.put_object, Bucket=bucket, Key=k, Body=body))
            offsets[p] += len(lines)
            return k

        for i, (p, ev) in enumerate(load_events(large.orders)):
            buffers[p].append(json.dumps(ev))
            if len(buffers[p]) >= EVENTS_PER_FILE:
                put(p, buffers[p])
                buffers[p], files = [], files + 1
            if (i + 1) % max(1, large.orders // 5) == 0:
                say(f"  generated {i + 1:,}/{large.orders:,} orders ({time.monotonic() - t0:.0f}s)")
        for p in range(PARTITIONS):
            if buffers[p]:
                put(p, buffers[p])
                files += 1
        batches = [
            (b, put(CHANGE_PARTITION, [json.dumps(ev) for ev in batch_events(large.orders, b)]))
            for b in plan(large)
        ]
        for f in pending:
            f.result()
    return files, batches
