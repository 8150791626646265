"""Bad raw input on the real S3 server and the real Hudi bundle: each line named by key and line,
the batch refused (nothing committed) or, with quarantine, the line kept aside."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from pyspark.sql import SparkSession

from bench.synthetic import OUTBOX_COLUMNS, TOPIC, SyntheticLake, event
from cdc_lake.lake.checkpoint import pending
from cdc_lake.lake.commit import IngestResult
from cdc_lake.lake.hudi_timeline import table_exists
from cdc_lake.lake.ingest import MalformedRawFileError, ingest_new_files
from cdc_lake.lake.raw_lines import MB, RawSource
from cdc_lake.lake.readers import read_table
from cdc_lake.raw.objects import MissingBucketError
from cdc_lake.resources.lake import LakeResource
from cdc_lake.source.captured import OUTBOX
from cdc_lake.spark_apps.upsert import run_upsert


def _ingest(spark: SparkSession, lake: SyntheticLake, **kw) -> IngestResult:
    return ingest_new_files(
        spark,
        lake.client,
        lake.source,
        lake.table(),
        captured=OUTBOX,
        declared=kw.pop("declared", OUTBOX_COLUMNS),
        **kw,
    )


def _line(e: dict, offset: int) -> bytes:
    e = {**e, "__kafka_topic": TOPIC, "__kafka_partition": 0, "__kafka_offset": offset}
    return json.dumps(e, ensure_ascii=False).encode()


def _put_bytes(lake: SyntheticLake, lines: list[bytes]) -> str:
    """One raw object of partition 0 at offset 0, its lines written byte for byte."""
    key = lake.key(0, 0)
    lake.client.put_object(Bucket=lake.raw_bucket, Key=key, Body=b"".join(x + b"\n" for x in lines))
    lake.next_offset[0] = len(lines)
    return key


def test_invalid_utf8_is_a_bad_line_and_a_real_replacement_character_is_not(
    spark, lake: SyntheticLake
):
    invalid = _line(event(2, 100, 2, customer_id="ALXXKI"), 1).replace(b"XX", b"\xff\xfe")
    key = _put_bytes(
        lake,
        [
            _line(event(1, 100, 1), 0),
            invalid,
            # U+FFFD written as valid UTF-8 is data, not a decoding error.
            _line(event(3, 100, 3, customer_id="AL\ufffdKI"), 2),
        ],
    )
    with pytest.raises(
        MalformedRawFileError, match=rf"1 malformed.*{re.escape(key)} line 2: not valid UTF-8"
    ):
        _ingest(spark, lake)
    assert not table_exists(spark, lake.table().base_path)

    result = _ingest(spark, lake, quarantine_path=lake.quarantine_path)
    assert result.quarantined == 1 and result.committed is not None
    rows = read_table(spark, lake.table().base_path).collect()
    assert {r["order_id"]: r["customer_id"] for r in rows} == {1: "ALFKI", 3: "AL\ufffdKI"}
    kept = spark.read.json(result.quarantine_path).collect()
    assert [(r["source_key"], r["line_no"], r["error"]) for r in kept] == [
        (key, 2, "not valid UTF-8")
    ]


def test_a_line_over_the_limit_is_named_with_its_size_not_parsed(spark, lake: SyntheticLake):
    huge = {**event(2, 100, 2), "shipper": json.dumps({"note": "x" * (20 * MB)})}
    key = lake.put([event(1, 100, 1), huge])
    # Valid JSON: parsed, it would fail as "wrong type: order_id is not bigint, ...".
    pattern = rf"{re.escape(key)} line 2: line 2 is 20\.0 MB, over the limit of 8 MB\. "
    with pytest.raises(MalformedRawFileError, match=pattern):
        _ingest(spark, lake)
    assert not table_exists(spark, lake.table().base_path)


def test_the_line_limit_is_a_lake_setting_passed_to_the_job(spark, lake: SyntheticLake, resources):
    two_mb = {**event(1, 100, 1), "shipper": json.dumps({"note": "x" * (2 * MB)})}
    key = lake.put([two_mb])
    params = replace(
        LakeResource(lake_bucket=lake.lake_bucket, max_line_mb=1.5).upsert_params(
            resources["cdc"], table=OUTBOX
        ),
        raw_bucket=lake.raw_bucket,
        raw_prefix=lake.raw_prefix,
        topic=TOPIC,
        table=lake.table(),
    )
    pattern = rf"{re.escape(key)} line 1: line 1 is 2\.0 MB, over the limit of 1\.5 MB\. "
    with pytest.raises(MalformedRawFileError, match=pattern):
        run_upsert(spark, lake.client, params)
    # Under the default limit the same line is an ordinary event.
    assert _ingest(spark, lake).events_upserted == 1


def test_a_blocking_object_says_how_to_get_past_it(spark, lake: SyntheticLake):
    key = lake.put([event(1, 100, 1), "{not json"])
    for _ in range(2):  # it blocks every refresh, and every refresh says so
        with pytest.raises(MalformedRawFileError) as err:
            _ingest(spark, lake)
        msg = str(err.value)
        assert f"{key} line 2: not valid JSON" in msg
        assert "Every refresh stops here" in msg
        assert "LakeResource(quarantine=True)" in msg
        assert f"fix or remove the object(s) s3://{lake.raw_bucket}/{key} " in msg
    assert not table_exists(spark, lake.table().base_path)


def test_a_missing_raw_bucket_is_named_with_its_setting_in_the_refresh(spark, lake: SyntheticLake):
    gone = RawSource("no-such-raw-bucket", lake.raw_prefix, TOPIC)
    expected = r"raw bucket 'no-such-raw-bucket' is missing .*NoSuchBucket.* raw_bucket setting"
    with pytest.raises(MissingBucketError, match=expected):
        ingest_new_files(
            spark, lake.client, gone, lake.table(), captured=OUTBOX, declared=OUTBOX_COLUMNS
        )
    # The lake asset's own listing (no Spark) and its sensor go through the same lister.
    with pytest.raises(MissingBucketError, match=expected):
        pending(lake.client, gone.bucket, gone.layout, None)
