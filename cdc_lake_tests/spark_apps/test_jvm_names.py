"""Pinned JVM names: the same answers as py4j's own lookups, without the round trips."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdc_lake.spark_apps.jvm_names import DOTTED, TOP_LEVEL, pin


@contextmanager
def round_trips(spark: SparkSession) -> Iterator[list[str]]:
    """The py4j commands sent to the JVM inside the block."""
    client: Any = spark.sparkContext._gateway._gateway_client  # type: ignore[union-attr]
    sent: list[str] = []
    send = client.send_command

    def counting(command: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(command)
        return send(command, *args, **kwargs)

    client.send_command = counting
    try:
        yield sent
    finally:
        del client.send_command  # back to the class's method


def test_pinned_names_answer_as_before_without_asking_the_jvm(spark: SparkSession):
    pin(spark)
    pin(spark)  # idempotent
    jvm: Any = spark.sparkContext._jvm
    with round_trips(spark) as sent:
        for short in TOP_LEVEL:
            getattr(jvm, short)
        for fqn in DOTTED:
            node = jvm
            for part in fqn.split("."):
                node = getattr(node, part)
    assert sent == []  # every pinned name, every component, found in Python
    # What they answer is what py4j's own lookup answers.
    assert jvm.org.apache.hadoop.fs.Path("s3a://bucket/a/key").getName() == "key"
    jc: Any = F.col("x")._jc
    assert jc.toString() == "x"
    # A static method is looked up once, then only called.
    F.lit(1)
    with round_trips(spark) as sent:
        F.lit(2)
    assert [c.split("\n")[0] for c in sent] == ["c"], sent
    # Names that are not pinned resolve through py4j as before, next to pinned ones, and a
    # static field is still read from the JVM.
    assert jvm.org.apache.spark.SparkConf(False).get("x", "d") == "d"
    assert jvm.java.lang.Math.max(2, 3) == 3
    with round_trips(spark) as sent:
        assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1
    assert sent
    total = spark.range(3).select(F.sum(F.col("id") + F.lit(1))).first()
    assert total is not None and total[0] == 6
