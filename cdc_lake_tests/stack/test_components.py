"""Each component of the session stack does real work: nothing here is mocked."""

from __future__ import annotations

import json
import uuid

import psycopg2

from cdc_lake.stack import LocalStack
from cdc_lake.stack.services import S3Proxy


def test_every_component_reports_healthy(local_stack: LocalStack):
    desc = local_stack.describe()
    assert desc["healthy"] is True
    for name in ("postgres", "s3", "kafka", "connect"):
        svc = desc["services"][name]
        assert svc["healthy"], name
        assert svc["pid"] and svc["rss_mb"] and svc["rss_mb"] > 1
    assert desc["spark"]["ready"]
    assert any("hudi-spark3.5-bundle_2.12" in j for j in desc["spark"]["jars"])
    # Status carries everything a client needs to connect.
    assert desc["postgres"]["dsn"].startswith("postgresql://cdc_lake:")
    assert desc["kafka"]["bootstrap_servers"] == local_stack.settings.kafka_bootstrap
    assert desc["s3"]["access_key"] and desc["s3"]["secret_key"]
    assert set(desc["s3"]["buckets"].values()) == set(local_stack.settings.buckets)


def test_postgres_is_logical_and_has_app_and_replication_users(local_stack: LocalStack):
    s = local_stack.settings
    with psycopg2.connect(s.pg_dsn()) as conn, conn.cursor() as cur:
        cur.execute("SHOW wal_level")
        assert cur.fetchone() == ("logical",)
        cur.execute("SELECT current_user, current_database()")
        assert cur.fetchone() == (s.pg_user, s.pg_database)
        cur.execute("SELECT rolreplication FROM pg_roles WHERE rolname = %s", (s.replication_user,))
        assert cur.fetchone() == (True,)
    # The replication user can open a replication connection.
    repl = psycopg2.connect(s.pg_dsn(s.replication_user), connection_factory=None)
    try:
        with repl.cursor() as cur:
            cur.execute("SELECT pg_is_in_recovery()")
            assert cur.fetchone() == (False,)
    finally:
        repl.close()


def test_connect_lists_debezium_and_s3_sink(local_stack: LocalStack):
    connect = local_stack.service("connect")
    classes = {p["class"] for p in connect.plugins()}  # type: ignore[attr-defined]
    assert "io.debezium.connector.postgresql.PostgresConnector" in classes
    assert "io.cdclake.connect.s3.S3JsonLinesSinkConnector" in classes


def test_boto3_put_list_get(local_stack: LocalStack):
    s3 = local_stack.service("s3")
    assert isinstance(s3, S3Proxy)
    client = s3.client()
    bucket = local_stack.settings.raw_bucket
    keys = [f"boto3-check/{i:03d}.json" for i in range(3)]
    for i, key in enumerate(keys):
        client.put_object(Bucket=bucket, Key=key, Body=json.dumps({"i": i}).encode())
    listed = client.list_objects_v2(Bucket=bucket, Prefix="boto3-check/")
    assert [o["Key"] for o in listed["Contents"]] == keys
    # StartAfter is what the sensor relies on to list only new objects.
    after = client.list_objects_v2(Bucket=bucket, Prefix="boto3-check/", StartAfter=keys[0])
    assert [o["Key"] for o in after["Contents"]] == keys[1:]
    body = client.get_object(Bucket=bucket, Key=keys[2])["Body"].read()
    assert json.loads(body) == {"i": 2}


def test_spark_s3a_put_list_get(local_stack: LocalStack, spark):
    bucket = local_stack.settings.lake_bucket
    path = f"s3a://{bucket}/spark-check/{uuid.uuid4().hex[:8]}"
    spark.createDataFrame([(i, f"row{i}") for i in range(10)], ["id", "name"]).coalesce(
        1
    ).write.json(path)
    # Listed through Hadoop's s3a filesystem...
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    names = [st.getPath().getName() for st in fs.listStatus(hpath)]
    assert "_SUCCESS" in names and any(n.startswith("part-") for n in names)
    # ...and the objects are really on the S3 server.
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    prefix = path.split(f"{bucket}/", 1)[1]
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    assert any(k.endswith("_SUCCESS") for k in keys)
    back = sorted((r.id, r.name) for r in spark.read.json(path).collect())
    assert back == [(i, f"row{i}") for i in range(10)]


def test_spark_writes_and_reads_a_hudi_table_on_s3a(local_stack: LocalStack, spark):
    path = f"s3a://{local_stack.settings.lake_bucket}/hudi-check/{uuid.uuid4().hex[:8]}"
    opts = {
        "hoodie.table.name": "hudi_check",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.partitionpath.field": "",
        "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
        "hoodie.datasource.write.operation": "upsert",
    }
    spark.createDataFrame([(1, "a", 1), (2, "b", 1)], ["id", "v", "ts"]).write.format(
        "hudi"
    ).options(**opts).mode("overwrite").save(path)
    spark.createDataFrame([(2, "b2", 2), (3, "c", 1)], ["id", "v", "ts"]).write.format(
        "hudi"
    ).options(**opts).mode("append").save(path)
    rows = spark.read.format("hudi").load(path)
    assert sorted((r.id, r.v) for r in rows.select("id", "v").collect()) == [
        (1, "a"),
        (2, "b2"),
        (3, "c"),
    ]
    commits = {r._hoodie_commit_time for r in rows.select("_hoodie_commit_time").collect()}
    assert len(commits) == 2  # two real Hudi commits on the S3 server
    client = local_stack.service("s3").client()  # type: ignore[attr-defined]
    prefix = path.split(f"{local_stack.settings.lake_bucket}/", 1)[1] + "/.hoodie/"
    listed = client.list_objects_v2(Bucket=local_stack.settings.lake_bucket, Prefix=prefix)
    assert listed["KeyCount"] > 0
