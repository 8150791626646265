"""Index cost: 10 new raw files of updates into a table that holds few orders, and into one
that holds many, with Hudi's GLOBAL_SIMPLE index and with the record-level index (RECORD_INDEX,
kept in the metadata table; cdc-lake's default since this benchmark).

GLOBAL_SIMPLE finds where each incoming key lives by reading the keys of every base file, so
its cost should grow with the table; the record index looks the keys up, so its cost should
grow with the new work only. The histories are the scale benchmark's generator (N events over
N/5 orders). Each round writes 10 new files of updates to existing orders under every history's
prefix, then ingests them into each table, alternating; medians over the rounds.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from bench.harness import Figure, median
from bench.scale import TOPIC, put_updates, write_raw
from bench.synthetic import OUTBOX_COLUMNS
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.lake.ingest import ingest_new_files
from cdc_lake.lake.raw_lines import RawSource
from cdc_lake.lake.readers import read_table
from cdc_lake.source.captured import OUTBOX

INDEXES = ("GLOBAL_SIMPLE", "RECORD_INDEX")
EVENTS_PER_NEW_FILE = 100
HUDI_META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
             "_hoodie_partition_path", "_hoodie_file_name")  # fmt: skip


def bench_index(
    spark: Any,
    client: Any,
    raw_bucket: str,
    lake_bucket: str,
    histories: tuple[int, ...],
    n_new: int,
    reps: int,
    say: Callable[[str], None],
) -> list[Figure]:
    setups: dict[int, tuple[str, dict[int, int], dict[str, HudiTableConfig]]] = {}
    for h in histories:
        prefix = f"bench-index/{h}-{uuid.uuid4().hex[:6]}/"
        say(f"index: {h:,} events of history under s3://{raw_bucket}/{prefix}")
        _, offsets = write_raw(client, raw_bucket, prefix, h, say)
        tables = {
            name: HudiTableConfig(
                base_path=f"s3a://{lake_bucket}/{prefix}{name.lower()}", index_type=name
            )
            for name in INDEXES
        }
        for name, table in tables.items():
            res = ingest_new_files(
                spark,
                client,
                RawSource(raw_bucket, prefix, TOPIC),
                table,
                captured=OUTBOX,
                declared=OUTBOX_COLUMNS,
            )
            say(f"  {name}: history ingested in {res.seconds:.1f}s")
        setups[h] = (prefix, offsets, tables)
    times: dict[tuple[int, str], list[float]] = {(h, n): [] for h in histories for n in INDEXES}
    for r in range(reps):
        for h, (prefix, offsets, tables) in setups.items():
            put_updates(client, raw_bucket, prefix, offsets, n_new, EVENTS_PER_NEW_FILE, h // 5, r,
                        stride=1_000_000)  # fmt: skip
            for name, table in tables.items():
                res = ingest_new_files(
                    spark,
                    client,
                    RawSource(raw_bucket, prefix, TOPIC),
                    table,
                    captured=OUTBOX,
                    declared=OUTBOX_COLUMNS,
                )
                assert len(res.files) == n_new, (h, name, len(res.files))
                times[(h, name)].append(res.seconds)
                say(f"  round {r + 1}/{reps}: {h:,} events, {name}: {res.seconds:.2f}s")
    # Both indexes must leave the same table: compare the live rows, column by column.
    same: dict[int, bool] = {}
    for h, (_, _, tables) in setups.items():
        a, b = (read_table(spark, t.base_path).drop(*HUDI_META) for t in tables.values())
        same[h] = a.count() == b.count() and a.exceptAll(b).count() == 0
    small, large = histories[0], histories[-1]
    figures = []
    for name in INDEXES:
        for h in histories:
            figures.append(
                Figure("index", f"{name}: {n_new} new files into {h // 5:,} orders",
                       median(times[(h, name)]), "s",
                       note="tables equal" if same[h] else "TABLES DIFFER")
            )  # fmt: skip
        figures.append(
            Figure("index", f"{name}: growth {large // 5:,} vs {small // 5:,} orders",
                   median(times[(large, name)]) / median(times[(small, name)]), "x", "<= 1.2")
        )  # fmt: skip
    figures.append(
        Figure("index", f"RECORD_INDEX / GLOBAL_SIMPLE at {large // 5:,} orders",
               median(times[(large, "RECORD_INDEX")]) / median(times[(large, "GLOBAL_SIMPLE")]),
               "x")
    )  # fmt: skip
    return figures
