"""A lake app (the upsert by default) in a process of its own: its own SparkSession and JVM, so
that a fault test can kill the Spark driver in the middle of a Hudi commit.

``python -m cdc_lake_tests.faults.upsert_worker '<json>'`` with ``state_dir``, ``port_base``,
``jars_dir`` (the stack's), ``params`` (``LakeResource.upsert_params``, or another app's) and
optionally ``app`` (``upsert``). It runs ``cdc_lake.spark_apps.run.run_app(spark, s3, app,
params)``, as the asset does, and prints the app's metadata as one JSON line.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> None:
    from cdc_lake.spark_apps.run import run_app
    from cdc_lake.stack import LocalStack, StackSettings
    from cdc_lake.stack.spark import build_spark_session

    cfg = json.loads(argv[1])
    settings = StackSettings.from_env(
        state_dir=cfg["state_dir"], port_base=cfg["port_base"], jars_dir=cfg["jars_dir"]
    )
    spark = build_spark_session(settings, app_name="cdc-lake-faults-upsert")
    spark.sparkContext.setLogLevel("ERROR")
    s3 = LocalStack(settings, verbose=False).service("s3").client()  # type: ignore[attr-defined]
    try:
        report = run_app(spark, s3, cfg.get("app", "upsert"), cfg["params"])
    finally:
        spark.stop()
    print(json.dumps({k: v["raw_value"] for k, v in report.metadata.items()}, default=str))


if __name__ == "__main__":
    main(sys.argv)
