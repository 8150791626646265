"""``python -m bench``: run the benchmarks on a local stack of their own and report.

    python -m bench                      # every benchmark at full size
    python -m bench --only sensor        # one of them
    python -m bench --only scale --scales 100000,1000000 --reps 2
    python -m bench --only peers --scales 100000,1000000 --reps 3 --batches 10
    python -m bench --only peers --large-table 1000000 --change-sizes 1000,10000
                                         # small batches into a big table (uniform, recent)
    python -m bench --only latency       # default vs tuned settings, in one run
    python -m bench --only latency --tuned-flush-ms 2000 --tuned-sensor-s 5 \
        --latency-variant hoodie.metadata.index.column.stats.enable=false
    python -m bench --only refresh --reps 2 --table-type COPY_ON_WRITE --table-type MERGE_ON_READ
    python -m bench --only warm --reps 3  # a fresh run process: Spark in it vs the lake server
    python -m bench --only cluster --reps 3  # a refresh on the standalone cluster vs the server
    python -m bench --only connect-iceberg  # Iceberg's Kafka Connect sink against cdc-lake
    python -m bench --only soak --soak-commits 2000  # a day of commits (hours; never by default)
    python -m bench --only policy        # what column policies cost matches_source and the upsert
    python -m bench --only history       # what a history table costs a refresh
    python -m bench --only history --table-type MERGE_ON_READ  # ... written as MERGE_ON_READ
    python -m bench --only sasl --latency-duration 240  # latency with Kafka's SASL vs without
    python -m bench --smoke              # tiny sizes: keeps the harness working (the tests)

The stack gets its own state directory and port base (``--port-base``, default 17400), so it
never disturbs a developer's stack or the test suite's; it is stopped at the end.
"""

from __future__ import annotations

import argparse
import math
import shlex
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from bench.benchmarks import bench_incremental, bench_sensor
from bench.connect_iceberg import bench_connect_iceberg
from bench.empty_run import bench_empty_run
from bench.harness import LoadSampler, Report, say, write_outputs
from bench.history_cost import bench_history_cost
from bench.index_cost import bench_index
from bench.lag_cost import bench_lag_cost
from bench.latency import Profile, bench_latency, default_profiles
from bench.peers import bench_peers
from bench.peers_large import DISTRIBUTIONS, LargeTable
from bench.policy_cost import bench_field_policy_upsert, bench_policy_cost
from bench.refresh_cost import bench_refresh_cost
from bench.sasl_cost import bench_sasl_cost
from bench.scale import bench_scale
from bench.soak import bench_soak, samples_table
from bench.warm_spark import bench_cluster, bench_warm_spark
from cdc_lake.lake.hudi import HudiTableConfig
from cdc_lake.stack import LocalStack, StackSettings
from cdc_lake.stack.install import install, install_optional
from cdc_lake.stack.services import S3Proxy, spark_cluster_services
from cdc_lake.stack.settings import project_root
from cdc_lake.stack.spark import build_spark_session

BENCHMARKS = (
    "sensor", "incremental", "latency", "scale", "peers", "index", "empty", "refresh", "warm",
    "cluster",
    "connect-iceberg", "soak", "lag", "policy", "history", "sasl",
)  # fmt: skip
# Run only when named: hours at full size (soak); a second whole stack (sasl).
ON_REQUEST = ("soak", "sasl")
# The benchmarks that need the whole stack (the others need only the S3 server).
WHOLE_STACK = ("latency", "connect-iceberg", "soak", "lag", "policy", "sasl")
NOT_YET = {
    "upsert-vs-hoodiestreamer": "hudi-utilities 1.x is not downloadable from this machine's "
    "Maven Central mirror (only 0.14.0), so HoodieStreamer cannot run beside Hudi 1.1.1; "
    "the peers benchmark compares Delta and Iceberg MERGE instead",
}


# The CLI's worker knobs each benchmark takes (keyword arguments of bench_scale, bench_peers).
SCALE_KNOBS = ("driver_memory", "shuffle_partitions", "parallelism", "variant_options")
PEERS_KNOBS = (
    "driver_memory", "shuffle_partitions", "variant_options", "delta_cdf", "large", "jvm_options",
)  # fmt: skip


def knobs_for(names: tuple[str, ...], knobs: dict | None) -> dict:
    return {k: v for k, v in (knobs or {}).items() if k in names}


def run(
    stack: LocalStack,
    only: list[str],
    smoke: bool,
    reps: int,
    spark=None,
    sensor_objects: int = 100_000,
    scales: tuple[int, ...] = (100_000, 1_000_000, 5_000_000),
    scale_knobs: dict | None = None,
    batches: int = 10,
    latency_profiles: list[Profile] | None = None,
    latency_duration_s: float = 180,
    latency_rate: float = 2.0,
    latency_rounds: int = 2,
    table_types: tuple[str, ...] = (HudiTableConfig.table_type,),
    soak_commits: int = 2_000,
    soak_sample_every: int = 100,
    soak_rate: float = 1.0,
    soak_max_minutes: float = math.inf,
    soak_samples: Path | None = None,
) -> Report:
    s = stack.settings
    s3 = stack.service("s3")
    assert isinstance(s3, S3Proxy)
    client = s3.client()
    report = Report()
    if "sensor" in only:
        n, new = (300, 5) if smoke else (sensor_objects, 10)
        report.add(*bench_sensor(client, s.raw_bucket, n, new, reps, say))
    if "scale" in only:
        # Each scale runs in a Spark driver of its own (a worker process).
        report.add(
            *bench_scale(stack, client, (2_000,) if smoke else scales, reps, say,
                         **knobs_for(SCALE_KNOBS, scale_knobs))
        )  # fmt: skip
    if "peers" in only:
        # Like scale, in a worker process: its session loads the Delta and Iceberg jars. Smoke:
        # 2 batches, the least with a change feed to measure (the first one creates the table).
        knobs = knobs_for(PEERS_KNOBS, scale_knobs)
        report.add(
            *bench_peers(stack, client, (2_000,) if smoke else scales, reps, say,
                         batches=2 if smoke else batches, warm_up=not smoke, **knobs)
        )  # fmt: skip
    if "warm" in only:
        # Fresh run processes of their own, and the stack's lake server.
        report.add(
            *bench_warm_spark(stack, client, 50 if smoke else 2_000, 2 if smoke else 3,
                              5 if smoke else 20, reps, say)
        )  # fmt: skip
    if "cluster" in only:
        # Fresh run processes, the lake server and the stack's standalone cluster.
        report.add(
            *bench_cluster(stack, client, 50 if smoke else 2_000, 2 if smoke else 3,
                           5 if smoke else 20, reps, say)
        )  # fmt: skip
    if "connect-iceberg" in only:
        # In a worker process too: its session loads Iceberg's Spark runtime beside Hudi.
        changes = 10 if smoke else 240
        report.add(*bench_connect_iceberg(stack, say, changes=changes, rate=2.0))
    if "sasl" in only:
        # A second whole stack, Kafka without SASL, beside this one; the latency lanes on both.
        duration, rate, rounds = (
            (8, 1.0, 2) if smoke else (latency_duration_s, latency_rate, max(4, latency_rounds))
        )
        report.add(*bench_sasl_cost(stack, duration, rate, rounds, say))
    if "policy" in only:
        # PostgreSQL only: the digest that matches_source runs.
        report.add(*bench_policy_cost(stack, 200 if smoke else 200_000, reps, say))
    if "soak" in only:
        # Its runs' Spark apps go to the stack's lake server, the process that soaks.
        commits, every = (2, 1) if smoke else (soak_commits, soak_sample_every)
        figures, samples = bench_soak(
            stack, commits, every, soak_rate, say, soak_max_minutes, soak_samples
        )
        report.add(*figures)
        report.sections.append(f"Soak samples:\n\n{samples_table(samples)}")
    spark_users = ("incremental", "latency", "index", "empty", "refresh", "lag", "history",
                   "policy")  # fmt: skip
    own = spark is None and any(b in only for b in spark_users)
    if own:
        spark = build_spark_session(s, app_name="cdc-lake-bench")
    try:
        if "incremental" in only:
            # Smoke: one history (its ratio is then 1); each history costs 2 commits.
            histories = (2,) if smoke else (10, 1_000, 10_000)
            new = 2 if smoke else 10
            report.add(
                *bench_incremental(
                    spark, client, s.raw_bucket, s.lake_bucket, histories, new, reps, say
                )
            )
        if "index" in only:
            # Smoke: one history (its growth ratio is then 1); each history costs 4 commits.
            histories = (500,) if smoke else (10_000, 1_000_000)
            report.add(
                *bench_index(
                    spark, client, s.raw_bucket, s.lake_bucket, histories, 2 if smoke else 10,
                    reps, say,
                )
            )  # fmt: skip
        if "history" in only:
            rows, changes = (50, 10) if smoke else (100_000, 2_000)
            for history_type in table_types:  # the history table's type (--table-type)
                report.add(
                    *bench_history_cost(spark, client, s.raw_bucket, s.lake_bucket, rows,
                                        changes, 1 if smoke else max(reps, 5), say, history_type)
                )  # fmt: skip
        if "policy" in only:
            orders, changes = (50, 10) if smoke else (20_000, 2_000)
            report.add(
                *bench_field_policy_upsert(spark, client, s.raw_bucket, s.lake_bucket, orders,
                                           changes, 1 if smoke else max(reps, 5), say,
                                           warm_up=not smoke)
            )  # fmt: skip
        if "empty" in only:
            # The Spark session above is the one the lazy local resource picks up.
            report.add(*bench_empty_run(stack, client, 50 if smoke else 2_000, reps, say))
        if "refresh" in only:
            small, big = (50, 500) if smoke else (2_000, 200_000)
            report.add(
                *bench_refresh_cost(
                    stack,
                    client,
                    small,
                    big,
                    2 if smoke else 10,
                    5 if smoke else 20,
                    reps,
                    say,
                    table_types,
                )
            )
        if "lag" in only:
            orders, changes = (50, 5) if smoke else (2_000, 20)
            report.add(*bench_lag_cost(stack, client, orders, changes, reps, say))
        if "latency" in only:
            # Default and tuned settings, each on a pipeline of its own, in this one run.
            duration, rate, rounds = (
                (8, 1.0, 1) if smoke else (latency_duration_s, latency_rate, latency_rounds)
            )
            profiles = latency_profiles or default_profiles()
            report.add(*bench_latency(stack, duration, rate, profiles, rounds, say))
    finally:
        if own and spark is not None:
            spark.stop()
    return report


def cli_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", action="append", choices=BENCHMARKS)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sensor-objects", type=int, default=100_000)
    parser.add_argument(
        "--scales",
        default=None,
        help="events per size (scale, peers; default 100000,1000000,5000000, or none for "
        "peers with --large-table)",
    )
    parser.add_argument("--batches", type=int, default=10, help="peers: batches per size")
    parser.add_argument(
        "--large-table",
        type=int,
        metavar="ORDERS",
        help="peers: the large-table mode, small batches of changes into a table of ORDERS",
    )
    parser.add_argument(
        "--change-sizes", default="1000,10000", help="peers --large-table: changes per batch"
    )
    parser.add_argument(
        "--large-batches", type=int, default=3, help="peers --large-table: batches of each kind"
    )
    parser.add_argument(
        "--distributions",
        default=",".join(DISTRIBUTIONS),
        help="peers --large-table: which orders change (uniform, recent)",
    )
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument(
        "--jvm-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="peers: one more option of the worker's driver JVM, written with '=' "
        "(--jvm-option=-XX:TieredStopAtLevel=1); scale does not take it",
    )
    parser.add_argument("--hudi-parallelism", type=int, default=2)
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="scale, peers: also time the upsert with this Hudi option (paired with the default);"
        " peers also takes cdc_lake.FIELD=JSON, a HudiTableConfig field, and spark.sql.KEY=VALUE,"
        " a Spark SQL setting for that side's runs only",
    )
    parser.add_argument(
        "--delta-cdf",
        action="store_true",
        help="peers: also time Delta's MERGE with its change data feed on (side B2)",
    )
    parser.add_argument(
        "--table-type",
        action="append",
        choices=("COPY_ON_WRITE", "MERGE_ON_READ"),
        help="refresh: the lake's table type; give it twice to time both (default: the lake's)",
    )
    parser.add_argument(
        "--latency-duration", type=float, default=180, help="latency: workload seconds per profile"
    )
    parser.add_argument("--latency-rate", type=float, default=2.0, help="latency: changes/s")
    parser.add_argument(
        "--latency-rounds", type=int, default=2, help="latency: turns per profile (A B, B A, ...)"
    )
    parser.add_argument(
        "--tuned-flush-ms", type=int, default=2_000, help="latency: the tuned S3 sink flush"
    )
    parser.add_argument(
        "--tuned-sensor-s", type=float, default=5.0, help="latency: the tuned sensor interval"
    )
    parser.add_argument(
        "--latency-variant",
        action="append",
        default=[],
        metavar="KEY=VALUE[,KEY=VALUE]",
        help="latency: one more profile, the tuned settings plus these Hudi options",
    )
    parser.add_argument("--soak-commits", type=int, default=2_000, help="soak: commits to make")
    parser.add_argument(
        "--soak-sample-every", type=int, default=100, help="soak: commits between samples"
    )
    parser.add_argument("--soak-rate", type=float, default=1.0, help="soak: changes/s")
    parser.add_argument(
        "--soak-max-minutes", type=float, default=math.inf, help="soak: stop after this long"
    )
    parser.add_argument(
        "--soak-samples",
        type=Path,
        help="soak: append each sample to this file as a JSON line when it is taken",
    )
    parser.add_argument(
        "--background-load",
        type=int,
        default=0,
        metavar="N",
        help="N busy-looping processes beside the run (the load is reported either way)",
    )
    parser.add_argument("--port-base", type=int, default=17400)
    parser.add_argument("--json", default="bench/results.json")
    parser.add_argument("--no-docs", action="store_true", help="do not append to docs")
    return parser


def large_table(args: argparse.Namespace) -> LargeTable | None:
    if not args.large_table:
        return None
    return LargeTable(
        args.large_table,
        tuple(int(x) for x in args.change_sizes.split(",")),
        args.large_batches,
        tuple(args.distributions.split(",")),
    )


def worker_knobs(args: argparse.Namespace) -> dict:
    """The CLI's knobs for the worker benchmarks (scale, peers); each takes its own of them."""
    return {
        "driver_memory": args.driver_memory,
        "shuffle_partitions": args.shuffle_partitions,
        "parallelism": args.hudi_parallelism,
        "variant_options": dict(v.split("=", 1) for v in args.variant),
        "delta_cdf": args.delta_cdf,
        "large": large_table(args),
        "jvm_options": tuple(args.jvm_option),
    }


def main(argv: list[str] | None = None) -> int:
    args = cli_parser().parse_args(argv)
    only: list[str] = args.only or [str(b) for b in BENCHMARKS if b not in ON_REQUEST]
    reps = 1 if args.smoke else args.reps
    knobs = worker_knobs(args)
    large = knobs["large"]
    # With --large-table alone, peers runs that mode only.
    default_scales = "" if large else "100000,1000000,5000000"
    scales = tuple(int(x) for x in (args.scales or default_scales).split(",") if x)
    state = Path(tempfile.mkdtemp(prefix="cdc-lake-bench-"))
    state.chmod(0o755)
    project = StackSettings.from_env()
    settings = StackSettings.from_env(
        state_dir=state, port_base=args.port_base, jars_dir=project.jars_dir
    )
    install(settings)
    if "connect-iceberg" in only:  # before Connect starts: a worker loads plugins when it starts
        install_optional(settings, "iceberg-connect")
    # Latency and connect-iceberg need the whole stack; warm needs the lake server too, the
    # others only the S3 server.
    servers = ["s3", "lake_server"] if {"warm", "cluster"} & set(only) else ["s3"]
    if "cluster" in only:  # and the standalone cluster, which the child runs' settings name
        settings = replace(settings, spark_mode="cluster")
        servers += [svc.name for svc in spark_cluster_services(settings)]
    whole = any(b in only for b in WHOLE_STACK)
    stack = LocalStack(settings, verbose=False, only=None if whole else servers)
    try:
        what = "stack" if whole else "S3 server"
        say(f"bench: {what} up in {sum(stack.up().values()):.1f}s")
        load = LoadSampler(busy=args.background_load)
        with load:
            report = run(
                stack,
                only,
                args.smoke,
                reps,
                sensor_objects=args.sensor_objects,
                scales=scales,
                scale_knobs=knobs,
                batches=args.batches,
                latency_profiles=default_profiles(
                    args.tuned_flush_ms,
                    args.tuned_sensor_s,
                    [dict(kv.split("=", 1) for kv in v.split(",")) for v in args.latency_variant],
                ),
                latency_duration_s=args.latency_duration,
                latency_rate=args.latency_rate,
                latency_rounds=args.latency_rounds,
                table_types=tuple(args.table_type or (HudiTableConfig.table_type,)),
                soak_commits=args.soak_commits,
                soak_sample_every=args.soak_sample_every,
                soak_rate=args.soak_rate,
                soak_max_minutes=args.soak_max_minutes,
                soak_samples=args.soak_samples,
            )
        report.load = load.summary()
        say(f"bench: {LoadSampler.describe(report.load)}")
    finally:
        stack.down()
        shutil.rmtree(state, ignore_errors=True)
    for name, why in NOT_YET.items():
        say(f"bench: {name}: not run ({why})")
    print(report.table())
    for section in report.sections:
        print(f"\n{section}")
    command = "python -m bench " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    docs = None if args.no_docs else project_root() / "docs" / "benchmarks-log.md"
    write_outputs(report, Path(args.json), docs, command.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
