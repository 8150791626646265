"""The benchmarks. Each returns figures; none asserts a timing.

- ``sensor``: one tick's cost with N objects under the raw prefix, a few of them new. cdc-lake's
  listing (StartAfter per topic partition, from a cursor) against a sensor built on
  ``dagster_aws.s3.sensor.get_objects``, which lists the whole prefix. Reports time and LIST
  requests.
- ``incremental``: the time to ingest a few new raw files into a Hudi table that already holds
  10, 1,000 or 10,000 ingested files. The rounds alternate over the history sizes, and each
  size is compared with the smallest.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.harness import Figure, median, paired
from bench.synthetic import OUTBOX_COLUMNS, SyntheticLake, event
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.raw.objects import list_objects
from cdc_lake.source.captured import OUTBOX


class ListCounter:
    """Counts ListObjectsV2 calls made through a boto3 client."""

    def __init__(self, client: Any):
        self.count = 0
        client.meta.events.register("before-call.s3.ListObjectsV2", self._hit)

    def _hit(self, **_: Any) -> None:
        self.count += 1


def _put_many(client: Any, bucket: str, keys: list[str], say: Callable[[str], None]) -> None:
    step = max(1, len(keys) // 10)

    def put(i_key: tuple[int, str]) -> None:
        i, key = i_key
        client.put_object(Bucket=bucket, Key=key, Body=b'{"x": 1}\n')
        if (i + 1) % step == 0:
            say(f"  wrote {i + 1:,}/{len(keys):,} objects")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(put, enumerate(keys)))


def bench_sensor(
    client: Any,
    bucket: str,
    n_objects: int,
    n_new: int,
    reps: int,
    say: Callable[[str], None],
    partitions: int = 2,
    baseline_max: int = 20_000,
) -> list[Figure]:
    """Above ``baseline_max`` objects the full-listing side is not run: on S3Proxy's filesystem
    backend each page of a listing walks the prefix, so one full listing of 100k objects did
    not finish within 12 minutes (measured); the figure says so instead of a time."""
    from dagster_aws.s3.sensor import get_objects

    syn = SyntheticLake(client, bucket, bucket, name=f"sensor-{uuid.uuid4().hex[:6]}")
    say(f"sensor: writing {n_objects:,} objects under s3://{bucket}/{syn.raw_prefix}")
    old_keys = [syn.key(i % partitions, i) for i in range(n_objects)]
    _put_many(client, bucket, old_keys, say)
    # The cursor a previous tick would have left: the last key per partition. Built from the
    # keys written rather than by a full listing, which S3Proxy makes slow at 100k objects.
    cursor: dict[int, str | None] = {}
    for i, key in enumerate(old_keys):
        cursor[i % partitions] = max(cursor.get(i % partitions) or "", key)
    last_old = syn.key((n_objects - 1) % partitions, n_objects - 1)
    new_keys = [syn.key(i % partitions, n_objects + i) for i in range(n_new)]
    _put_many(client, bucket, new_keys, say)

    counter = ListCounter(client)
    calls: dict[str, int] = {}
    found: dict[str, int] = {}

    def ours() -> None:
        before = counter.count
        new = list_objects(client, bucket, syn.source.layout, cursor).objects
        calls["ours"], found["ours"] = counter.count - before, len(new)

    def full_listing() -> None:
        before = counter.count
        new = get_objects(bucket, syn.raw_prefix, since_key=last_old, client=client)
        calls["dagster_aws"], found["dagster_aws"] = counter.count - before, len(new)

    name = f"{n_objects:,} objects, {n_new} new"
    if n_objects > baseline_max:
        say(f"sensor: {reps} ticks of ours only (over {baseline_max:,} objects, see docstring)")
        ta, _ = paired(ours, lambda: None, reps, say)
        return [
            Figure("sensor tick", f"cdc-lake tick ({name})", median(ta), "s", "< 0.5 s"),
            Figure("sensor tick", "cdc-lake LIST requests per tick", calls["ours"], "",
                   f"1 + 1 per partition ({partitions} partitions)",
                   f"found {found['ours']} new"),
            Figure("sensor tick", f"dagster_aws get_objects tick ({name})", float("nan"), "s",
                   note=f"not run above {baseline_max:,} objects: a full listing of 100,000 "
                   "did not finish in 12 min on S3Proxy"),
        ]  # fmt: skip
    say(f"sensor: {reps} paired ticks (A: StartAfter cursor, B: dagster_aws get_objects)")
    ta, tb = paired(ours, full_listing, reps, say)
    a, b = median(ta), median(tb)
    return [
        Figure("sensor tick", f"cdc-lake tick ({name})", a, "s", "< 0.5 s"),
        Figure("sensor tick", f"dagster_aws get_objects tick ({name})", b, "s"),
        Figure("sensor tick", "ratio dagster_aws / cdc-lake", b / a, "x"),
        Figure(
            "sensor tick",
            "cdc-lake LIST requests per tick",
            calls["ours"],
            "",
            f"1 + 1 per partition ({partitions} partitions)",
            f"found {found['ours']} new",
        ),
        Figure(
            "sensor tick",
            "dagster_aws LIST requests per tick",
            calls["dagster_aws"],
            "",
            note=f"returned {found['dagster_aws']} objects",
        ),
    ]


def bench_incremental(
    spark: Any,
    client: Any,
    raw_bucket: str,
    lake_bucket: str,
    histories: tuple[int, ...],
    n_new: int,
    reps: int,
    say: Callable[[str], None],
) -> list[Figure]:
    lakes: dict[int, SyntheticLake] = {}
    for h in histories:
        syn = SyntheticLake(
            client, raw_bucket, lake_bucket, name=f"incr-{h}-{uuid.uuid4().hex[:6]}"
        )
        say(f"incremental: {h:,} files of history for {syn.raw_prefix}")
        keys = [syn.key(0, i) for i in range(h)]
        _put_events(client, raw_bucket, keys, order_base=0, say=say)
        syn.next_offset[0] = h
        res = ingest_new_files(
            spark, client, syn.source, syn.table(), captured=OUTBOX, declared=OUTBOX_COLUMNS
        )
        say(f"  history ingested: {len(res.files):,} files in {res.seconds:.1f}s")
        lakes[h] = syn
    times: dict[int, list[float]] = {h: [] for h in histories}
    for r in range(reps):
        for h in histories:
            syn = lakes[h]
            offset = syn.next_offset[0]
            keys = [syn.key(0, offset + i) for i in range(n_new)]
            _put_events(client, raw_bucket, keys, order_base=offset, say=None)
            syn.next_offset[0] = offset + n_new
            res = ingest_new_files(
                spark, client, syn.source, syn.table(), captured=OUTBOX, declared=OUTBOX_COLUMNS
            )
            assert len(res.files) == n_new, (h, len(res.files))
            times[h].append(res.seconds)
            say(f"  round {r + 1}/{reps}: {h:,} files of history -> {res.seconds:.2f}s")
    base = median(times[histories[0]])
    figures = []
    for h in histories:
        m = median(times[h])
        figures.append(
            Figure("incremental", f"ingest {n_new} new files, {h:,} already ingested", m, "s")
        )
        figures.append(
            Figure(
                "incremental",
                f"ratio vs {histories[0]:,} ingested ({h:,})",
                m / base,
                "x",
                "<= 1.2",
            )
        )
    return figures


def _put_events(
    client: Any, bucket: str, keys: list[str], order_base: int, say: Callable[[str], None] | None
) -> None:
    """One event per file: an update to one of 200 orders, newer than every earlier one."""

    def put(i_key: tuple[int, str]) -> None:
        i, key = i_key
        n = order_base + i
        body = json.dumps(event(n % 200 + 1, ts=1_000_000 + n, lsn=n)) + "\n"
        client.put_object(Bucket=bucket, Key=key, Body=body.encode())

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(put, enumerate(keys)))
    if say:
        say(f"  wrote {len(keys):,} raw files")
