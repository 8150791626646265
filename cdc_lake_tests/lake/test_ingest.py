"""The Hudi upsert on real S3 and the real Hudi bundle, with hand-written raw files: ordering,
deletes, replay, bad input, partition moves, table types, time travel and incremental reads."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest
from pyspark.sql import SparkSession

from bench.synthetic import OUTBOX_COLUMNS, OUTBOX_SCHEMA, SyntheticLake, event
from cdc_lake.lake.hudi_timeline import completed_commits, recorded_partition_field
from cdc_lake.lake.ingest import MalformedRawFileError, ingest_new_files
from cdc_lake.lake.readers import read_as_of, read_incremental, read_table
from cdc_lake.source.captured import OUTBOX
from cdc_lake.stack import LocalStack

EPOCH = dt.date(1970, 1, 1)


def day(n: int) -> dt.date:
    return EPOCH + dt.timedelta(days=n)


DATA_COLS = ["order_id", "customer_id", "order_date", "shipped_date", "order_items", "is_deleted"]


@pytest.fixture
def lake(local_stack: LocalStack) -> SyntheticLake:
    s = local_stack.settings
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    return SyntheticLake(client, s.raw_bucket, s.lake_bucket)


def _rows(spark: SparkSession, path: str) -> dict[int, tuple]:
    df = read_table(spark, path).select(*DATA_COLS)
    return {r["order_id"]: tuple(r) for r in df.collect()}


def _ingest(spark, lake: SyntheticLake, **kw):
    table = kw.pop("table", None) or lake.table()
    return ingest_new_files(spark, lake.client, lake.source, table, captured=OUTBOX,
        declared=kw.pop("declared", OUTBOX_COLUMNS), **kw)


def test_latest_wins_in_a_batch_and_across_batches(spark, lake: SyntheticLake):
    # Three updates to one order in one batch, split over two files: the last one wins.
    lake.put([event(1, ts=100, lsn=10, op="c", shipped_date=None), event(1, ts=110, lsn=11)])
    lake.put([event(1, ts=120, lsn=12, shipped_date=10003), event(2, ts=100, lsn=13)])
    first = _ingest(spark, lake)
    assert first.committed is not None and first.events_read == 4 and first.events_upserted == 2
    rows = _rows(spark, lake.table().base_path)
    assert rows[1][3] == day(10003)
    assert set(rows) == {1, 2}

    # An older change delivered after a newer one is ignored...
    lake.put([event(1, ts=105, lsn=9, shipped_date=10001)])
    # ...and equal timestamps are ordered by LSN.
    lake.put([event(2, ts=100, lsn=14, shipped_date=10005), event(2, ts=100, lsn=12)])
    _ingest(spark, lake)
    rows = _rows(spark, lake.table().base_path)
    assert rows[1][3] == day(10003)
    assert rows[2][3] == day(10005)  # lsn 14 beats lsn 12


def test_deletes_hard_by_default_and_soft_on_request(spark, lake: SyntheticLake):
    lake.put([event(1, 100, 1, op="c"), event(2, 100, 2, op="c"), event(3, 100, 3, op="c")])
    lake.put([event(2, 200, 4, op="d", deleted=True)])
    _ingest(spark, lake)
    assert set(_rows(spark, lake.table().base_path)) == {1, 3}
    # A delete older than the row it targets is ignored.
    lake.put([event(3, 50, 0, op="d", deleted=True)])
    _ingest(spark, lake)
    assert set(_rows(spark, lake.table().base_path)) == {1, 3}

    soft = SyntheticLake(lake.client, lake.raw_bucket, lake.lake_bucket)
    soft.put([event(7, 100, 1, op="c"), event(7, 200, 2, op="d", deleted=True)])
    _ingest(spark, soft, table=soft.table(delete_mode="soft"))
    soft.put([event(7, 150, 1, op="u")])  # older than the delete: must not revive the order
    _ingest(spark, soft, table=soft.table(delete_mode="soft"))
    rows = _rows(spark, soft.table().base_path)
    assert rows[7][5] is True


def test_no_new_files_commits_nothing_and_replay_changes_nothing(spark, lake: SyntheticLake):
    lake.put([event(i, 100, i, op="c") for i in range(1, 6)])
    _ingest(spark, lake)
    path = lake.table().base_path
    before, commits = _rows(spark, path), len(list(completed_commits(spark, path)))

    idle = _ingest(spark, lake)
    assert idle.committed is None and idle.files == []
    assert len(list(completed_commits(spark, path))) == commits

    # The same events delivered again under a new key (a sink redelivery): same content.
    lake.put([event(i, 100, i, op="c") for i in range(1, 6)])
    again = _ingest(spark, lake)
    assert again.committed is not None
    assert _rows(spark, path) == before


def test_malformed_file_fails_naming_key_and_line_and_commits_nothing(spark, lake: SyntheticLake):
    lake.put([event(1, 100, 1)])
    _ingest(spark, lake)
    path = lake.table().base_path
    commits = len(list(completed_commits(spark, path)))
    bad_key = lake.put(
        [event(2, 100, 2), '{"order_id": 3, "__op": "u"', {**event(4, 100, 4), "order_id": None}]
    )
    with pytest.raises(MalformedRawFileError) as err:
        _ingest(spark, lake)
    msg = str(err.value)
    assert f"{bad_key} line 2" in msg and f"{bad_key} line 3" in msg
    assert len(list(completed_commits(spark, path))) == commits
    assert set(_rows(spark, path)) == {1}  # order 2, though valid, was not half-committed

    # With quarantine, the good lines go in and the bad ones are kept aside.
    result = _ingest(spark, lake, quarantine_path=lake.quarantine_path)
    assert result.quarantined == 2 and result.committed is not None
    assert set(_rows(spark, path)) == {1, 2}
    quarantined = spark.read.json(result.quarantine_path).collect()
    assert sorted(r["line_no"] for r in quarantined) == [2, 3]
    assert {r["source_key"] for r in quarantined} == {bad_key}


def test_partition_change_leaves_no_duplicate(spark, lake: SyntheticLake):
    table = lake.table(partition_field="order_year")
    lake.put([event(1, 100, 1, order_date=9700)])  # 1996
    _ingest(spark, lake, table=table)
    lake.put([event(1, 200, 2, order_date=10300)])  # 1998
    _ingest(spark, lake, table=table)
    rows = read_table(spark, table.base_path).collect()
    where = [(r["order_id"], r["order_year"], r["_hoodie_partition_path"]) for r in rows]
    assert where == [(1, "1998", "order_year=1998")]


@pytest.mark.parametrize(("created", "setting"), [("order_year", ""), ("", "order_year")])
def test_an_existing_table_is_written_in_the_layout_it_was_created_with(
    spark, lake: SyntheticLake, created: str, setting: str
):
    # Hudi refuses a write whose key generator is not the table's (it cannot re-lay a table out):
    # a changed setting applies to new tables, and the old one goes on as it was, saying so.
    first = _ingest(spark, lake, table=lake.table(partition_field=created))
    assert first.committed is None  # no raw file yet, no table
    lake.put([event(i, 100, i, op="c", order_date=9700) for i in (1, 2, 3)])
    first = _ingest(spark, lake, table=lake.table(partition_field=created))
    assert first.partition_field == created and first.layout_note == ""

    table = lake.table(partition_field=setting)
    assert recorded_partition_field(spark, table.base_path) == created
    lake.put([
        event(1, 200, 4, order_date=10300),  # a year later: a move in the partitioned layout
        event(2, 200, 5, op="d", deleted=True),
    ])  # fmt: skip
    second = _ingest(spark, lake, table=table)
    assert second.committed is not None and second.partition_field == created
    assert f"partition_field={setting!r}" in second.layout_note
    assert ("partitioned by order_year" if created else "without partitions") in (
        second.layout_note.split(";")[0]
    )
    assert recorded_partition_field(spark, table.base_path) == created
    rows = read_table(spark, table.base_path).collect()
    got = sorted((r["order_id"], r["order_year"], r["_hoodie_partition_path"]) for r in rows)
    where = (lambda y: f"order_year={y}") if created else (lambda y: "")
    assert got == [(1, "1998", where("1998")), (3, "1996", where("1996"))]


@pytest.mark.parametrize("index_type", ["RECORD_INDEX", "GLOBAL_SIMPLE"])
def test_a_table_without_partitions_upserts_without_move_reconciliation(
    spark, lake: SyntheticLake, index_type: str
):
    # No key can change partition in a table without partitions, so Hudi is not asked to
    # reconcile moves (a read of every record of the file groups a batch touches).
    option = {
        "RECORD_INDEX": "hoodie.record.index.update.partition.path",
        "GLOBAL_SIMPLE": "hoodie.simple.index.update.partition.path",
    }[index_type]
    table = lake.table(index_type=index_type)  # the default: no partitions
    options = table.write_options(schema=OUTBOX_SCHEMA)
    assert table.partition_field == "" and options[option] == "false"
    partitioned = lake.table(partition_field="order_year", index_type=index_type)
    assert partitioned.write_options(schema=OUTBOX_SCHEMA)[option] == "true"

    lake.put([event(i, 100, i, op="c", order_date=9700) for i in (1, 2, 3)])
    _ingest(spark, lake, table=table)
    lake.put([
        event(1, 200, 4, order_date=10300),  # a year later: a move in a partitioned table
        event(2, 200, 5, op="d", deleted=True),
        event(3, 50, 0, shipped_date=10001),  # older than the row: ignored
    ])  # fmt: skip
    _ingest(spark, lake, table=table)
    rows = _rows(spark, table.base_path)
    assert set(rows) == {1, 3}
    assert rows[1][2] == day(10300) and rows[3][3] == day(10000)
    assert read_table(spark, table.base_path).filter("order_id = 1").count() == 1


def test_an_update_finds_its_row_in_any_file_group(spark, lake: SyntheticLake):
    # Small base files spread the orders over many file groups, so an update that the record
    # index (the default) did not locate would land beside its old row (as with Hudi's virtual
    # keys, whose record index stays empty) instead of replacing it.
    table = lake.table(
        extra_options={"hoodie.parquet.max.file.size": "20000",
                       "hoodie.parquet.small.file.limit": "0"},
    )  # fmt: skip
    lake.put([event(i, 100, i, op="c") for i in range(1, 121)])
    _ingest(spark, lake, table=table)
    groups = {f.rsplit("/", 1)[1].split("_")[0] for f in read_table(spark, table.base_path)
              .inputFiles()}  # fmt: skip
    assert len(groups) >= 4
    lake.put([event(i, 200, 200 + i, shipped_date=10001) for i in range(1, 121, 3)])
    lake.put([event(i, 300, 400 + i, op="d", deleted=True) for i in range(2, 121, 10)])
    _ingest(spark, lake, table=table)
    df = read_table(spark, table.base_path)
    rows = _rows(spark, table.base_path)
    deleted = set(range(2, 121, 10))
    assert df.count() == len(rows) == 120 - len(deleted) and not deleted & set(rows)
    assert {i for i, r in rows.items() if r[3] == day(10001)} == set(range(1, 121, 3)) - deleted
    for key in (1, 61, 118):  # a key-filtered read finds the row wherever it lives
        assert df.filter(f"order_id = {key}").count() == 1
    # ...with no bloom filter in any base file: the record index never reads one (issue 52).
    assert not any(_footer(spark, f).containsKey(HUDI_BLOOM_KEY) for f in df.inputFiles())

    # The check sees one where Hudi writes it (its default, asked for again here).
    bloom = replace(table, base_path=f"{table.base_path}-bloom",
                    extra_options={"hoodie.parquet.bloom.filter.enabled": "true"})  # fmt: skip
    _ingest(spark, lake, table=bloom)
    files = read_table(spark, bloom.base_path).inputFiles()
    assert files and all(_footer(spark, f).containsKey(HUDI_BLOOM_KEY) for f in files)


# The key of the bloom filter Hudi writes into a base file's Parquet footer.
HUDI_BLOOM_KEY = "org.apache.hudi.bloomfilter"


def _footer(spark, path: str):
    """A Parquet file's key-value metadata (a java.util.Map), read by the JVM's Parquet."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    stream = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(
        jvm.org.apache.hadoop.fs.Path(path), conf
    )
    reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(stream)
    try:
        return reader.getFooter().getFileMetaData().getKeyValueMetaData()
    finally:
        reader.close()


def test_merge_on_read_upserts_and_compacts(spark, lake: SyntheticLake):
    # Without small-file handling, updates go to log files, which is what compaction merges.
    table = lake.table(
        table_type="MERGE_ON_READ",
        compaction_delta_commits=2,
        extra_options={"hoodie.parquet.small.file.limit": "0"},
    )
    for ts in (100, 200, 300):
        lake.put([event(1, ts, ts, shipped_date=10000 + ts), event(ts, ts, ts, op="c")])
        _ingest(spark, lake, table=table)
    rows = _rows(spark, table.base_path)
    assert set(rows) == {1, 100, 200, 300}
    assert rows[1][3] == day(10300)  # the newest
    actions = {c.action for c in completed_commits(spark, table.base_path)}
    assert "deltacommit" in actions and "commit" in actions  # inline compaction ran


def test_time_travel_and_incremental_reads(spark, lake: SyntheticLake):
    lake.put([event(1, 100, 1, shipped_date=10000), event(2, 100, 2)])
    first = _ingest(spark, lake).committed
    lake.put([event(1, 200, 3, shipped_date=10010), event(3, 200, 4, op="c")])
    second = _ingest(spark, lake).committed
    assert first and second
    path = lake.table().base_path
    then = {
        r["order_id"]: r["shipped_date"] for r in read_as_of(spark, path, first.instant).collect()
    }
    assert set(then) == {1, 2} and then[1] == day(10000)
    changed = read_incremental(spark, path, first.completed, second.completed)
    assert sorted(r["order_id"] for r in changed.collect()) == [1, 3]
