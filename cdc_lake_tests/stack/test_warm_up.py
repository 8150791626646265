"""The warm-up's rounds (``cdc_lake/stack/warm_up.py``) around an app of the test's own, on the
session stack's S3 (buckets of the test's own, so the lake server's warm-up is not disturbed):
what each round writes and sends, and that it gives way, ends, and leaves both prefixes empty
whatever happens. The app itself on the real path: ``test_lake_server.py``."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from cdc_lake.spark_apps.params import UpsertParams, UpsertReport
from cdc_lake.spark_apps.report import AppReport, meta
from cdc_lake.stack import LocalStack
from cdc_lake.stack import warm_up as W


def _keys(s3: Any, bucket: str) -> list[str]:
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=W.PREFIX)
    return sorted(o["Key"] for o in listed.get("Contents", []))


@pytest.fixture
def buckets(local_stack: LocalStack) -> tuple[Any, str, str]:
    s3 = local_stack.service("s3").client()  # type: ignore[attr-defined]
    raw, lake = f"warm-raw-{uuid.uuid4().hex[:8]}", f"warm-lake-{uuid.uuid4().hex[:8]}"
    for bucket in (raw, lake):
        s3.create_bucket(Bucket=bucket)
    # A leftover of a killed warm-up, which the next one deletes first.
    s3.put_object(Bucket=lake, Key=f"{W.PREFIX}stale", Body=b"x")
    return s3, raw, lake


class _App:
    """Stands in for ``run_app``: records each round's raw lines and params; ``fail_at``
    raises in that round, ``give_way_at`` returns None there (an app came first)."""

    def __init__(self, s3: Any, raw: str, fail_at: int = 0, give_way_at: int = 0):
        self.s3, self.raw, self.fail_at, self.give_way_at = s3, raw, fail_at, give_way_at
        self.rounds: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []

    def __call__(self, app: str, params: dict[str, Any]) -> AppReport | None:
        assert app == UpsertParams.APP
        n = len(self.rounds) + 1
        if n == self.give_way_at:
            return None
        if n == self.fail_at:
            raise RuntimeError("the app failed")
        lines = [
            json.loads(line)
            for key in _keys(self.s3, self.raw)
            for line in self.s3.get_object(Bucket=self.raw, Key=key)["Body"].read().splitlines()
        ]
        self.rounds.append((params, lines))
        report = AppReport()
        report.metadata[UpsertReport.LIVE_KEY_DIGEST] = meta({"round": n}, "json")
        return report


def test_each_round_is_a_small_refresh_of_the_last_until_the_jit_is_quiet(buckets, spark):
    s3, raw, lake = buckets
    app = _App(s3, raw)
    rounds = W.run(spark, s3, raw, lake, app, lambda _: None, lambda: False)
    # The test's app compiles nothing, so the JIT goes quiet from round 2 on, the first that may
    # end it (unless the JVM is still compiling what earlier tests ran: then a later round).
    assert 2 <= len(rounds) == len(app.rounds) <= W.MAX_ROUNDS
    (first, lines1), (second, lines2) = app.rounds[:2]
    assert len(lines1) == W.ORDERS and {e["order_id"] for e in lines1} == set(range(W.ORDERS))
    new = lines2[W.ORDERS :]
    assert len(new) == W.FILES * W.CHANGES and all(e["__op"] == "u" for e in new)
    # Each change is newer than every one before it, at the next Kafka offset.
    assert [e["__kafka_offset"] for e in lines1 + new] == list(range(len(lines1) + len(new)))
    assert [e["__lsn"] for e in lines1 + new] == sorted(e["__lsn"] for e in lines1 + new)
    # The app's own table, under the prefix; round 2 goes on from round 1's table state.
    for params in (first, second):
        assert params["table"]["base_path"] == f"s3a://{lake}/{W.PREFIX}{W.TOPIC}"
        assert params["raw_prefix"] == W.PREFIX
    assert first["previous_state"] is None and second["previous_state"] == {"round": 1}
    assert _keys(s3, raw) == [] and _keys(s3, lake) == []


def test_it_gives_way_to_an_app_and_leaves_nothing_when_a_round_fails(buckets, spark):
    s3, raw, lake = buckets
    # stop(): an app was asked for after round 1.
    app = _App(s3, raw)
    assert len(W.run(spark, s3, raw, lake, app, lambda _: None, lambda: bool(app.rounds))) == 1
    # The round that waited for the lock while an app was asked for gives way.
    app = _App(s3, raw, give_way_at=2)
    assert len(W.run(spark, s3, raw, lake, app, lambda _: None, lambda: False)) == 1
    assert _keys(s3, raw) == [] and _keys(s3, lake) == []
    app = _App(s3, raw, fail_at=2)
    with pytest.raises(RuntimeError, match="the app failed"):
        W.run(spark, s3, raw, lake, app, lambda _: None, lambda: False)
    assert len(app.rounds) == 1 and _keys(s3, raw) == [] and _keys(s3, lake) == []
