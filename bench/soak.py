"""``soak``: a day of commits. A steady workload on the outbox, the raw-files sensor ticking as
``dagster-daemon`` ticks it, and each run it requests refreshing the lake as ``lake_refresh``
does (the Hudi table with its checks, then the order items) on the stack's long-lived lake
server, with one persistent Dagster instance, until the table has ``commits`` new commits.

Like ``latency``, the soak has a pipeline of its own (database, topic, slot, raw prefix, tables
and instance under ``<state>/bench-soak``), and runs are materialized in this process with
``dg.materialize`` on that instance; their Spark apps go to the lake server, the process that
lives as long as the stack. Sensor ticks are evaluated here, not stored in the instance.

Every ``sample_every`` commits (and once before the first), one ``Sample``:
- the medians, over the commits since the last sample, of the Hudi step, the order-items step
  and the whole run, and the 1-minute load average;
- the lake server's RSS (with its JVM), its heap after a full GC and its threads (``GET
  /memory``), and the open descriptors and threads of the lake server, Connect and Kafka;
- the files of the Hudi table: its active timeline, archived timeline and metadata table, and the
  data files beside them;
- the Dagster instance's directory and its event log, and the runs in it;
- the WAL the replication slot retains, and the S3 sink's consumer lag.

At the end the workload stops, the lake catches up, and one more run's ``matches_source`` must
pass; then ``dagster_runs_prune``'s rules prune the instance (the runs deleted, the seconds, the
size before and after, and whether the lake's checkpoint stayed). A growth goal compares the
last sample with the one at a tenth of the run (commit 200 of 2,000): warm-up is over by then,
and the load is reported with each sample.

    python -m bench --only soak --soak-commits 2000 --soak-sample-every 100
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import dagster as dg

from bench.harness import Figure, materialize
from bench.latency import tick_period
from bench.outbox import HUDI_KEY, OUTBOX_KEYS
from bench.pipeline import BenchPipeline
from bench.refresh_lake import ASSETS
from cdc_lake.defs.keys import ORDER_ITEMS_KEY
from cdc_lake.defs.lake.checks import lake_checks
from cdc_lake.defs.lake.jobs import hudi_op
from cdc_lake.defs.unchanged import lake_checkpoint
from cdc_lake.lake.timeline import timeline_prefix
from cdc_lake.ops.instance import prepare_home
from cdc_lake.resources.local import local_resources
from cdc_lake.runs.retention import prune_runs
from cdc_lake.source.captured import OUTBOX, RESCAN_CHECK
from cdc_lake.source.preflight import slot_lag
from cdc_lake.source.workload import Workload
from cdc_lake.spark_apps.params import UpsertReport
from cdc_lake.stack import LocalStack
from cdc_lake.stack.process import rss_mb
from cdc_lake.stack.services import LakeServer
from cdc_lake.stack.settings import local_secret_env
from cdc_lake.streaming.topics import consumer_lag

NAME = "soak"
GROWTH_GOAL = 1.10  # a figure at the end within 10% of the same figure at a tenth of the run
SERVERS = ("lake_server", "connect", "kafka")


@dataclass
class Sample:
    commits: int
    minutes: float
    load: float
    hudi_s: float  # medians over the commits since the last sample
    items_s: float
    run_s: float
    server_rss_mb: float  # the lake server with its JVM
    heap_mb: float  # the lake server's JVM heap after a full GC
    jvm_threads: int
    threads: dict[str, int]  # per server in SERVERS (the lake server: with its JVM)
    fds: dict[str, int]
    timeline_files: int  # .hoodie/timeline/ less its history
    archived_files: int  # .hoodie/timeline/history/
    metadata_files: int  # .hoodie/metadata/
    data_files: int  # the table's files outside .hoodie/
    dagster_mb: float  # the instance's whole directory
    event_log_mb: float  # its event log (history/)
    runs: int
    wal_retained_mb: float
    sink_lag: int  # topic records the S3 sink has not committed


def _proc_count(pid: int, what: str) -> int:
    """Open descriptors (``fd``) or threads (``task``) of a process; 0 once it is gone."""
    try:
        return len(os.listdir(f"/proc/{pid}/{what}"))
    except OSError:
        return 0


def _dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else math.nan


class Soak:
    """The soak's own pipeline and instance, its workload, and the samples it takes."""

    def __init__(
        self,
        stack: LocalStack,
        say: Callable[[str], None],
        rate: float = 1.0,
        samples_file: Path | None = None,
        flush_interval_ms: int = 2_000,
        sensor_interval_s: float = 5.0,
        seed: int = 29,
    ) -> None:
        self.stack, self.say, self.rate, self.seed = stack, say, rate, seed
        self.samples_file = samples_file  # each sample appended as a JSON line when taken
        s = stack.settings
        self.database = f"cdc_lake_{NAME}"
        self.resources = local_resources(
            s,
            lake={
                "lake_prefix": f"{NAME}",
                "order_items_prefix": f"{NAME}/order_items",
            },
            spark="server",  # the long-lived lake server is what soaks
            database=self.database,
            topic_prefix=NAME,
            slot_name=f"{NAME}_slot",
            raw_prefix=f"{NAME}-events/",
            flush_interval_ms=flush_interval_ms,
        )
        self.cdc = self.resources["cdc"]
        # Its EnvVar password resolved, as Dagster does for a run: the workload and the samples
        # connect outside one.
        self.postgres = self.resources["postgres"].process_config_and_initialize()
        self.period = tick_period(sensor_interval_s)
        home = Path(s.state_dir) / f"bench-{NAME}" / "dagster_home"
        self.home = prepare_home(home, workspace=False)
        self.instance = dg.DagsterInstance.from_config(str(self.home))
        self.s3 = stack.service("s3").client()  # type: ignore[attr-defined]
        self.pipeline = BenchPipeline(stack, self.resources, self.instance)
        self.assets = [*ASSETS, *lake_checks(OUTBOX_KEYS)]
        self.commits = 0
        self.window: dict[str, list[float]] = {"hudi": [], "items": [], "run": []}
        self.samples: list[Sample] = []
        self.failed_checks: dict[str, int] = {}  # ERROR failures, per check
        self.rescans: list[bool] = []  # incremental_matches_rescan at each full scan
        self.runs_without_commit = 0
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._worker_error: BaseException | None = None  # the workload's failure: run raises it
        self.changes = 0

    # --- pipeline ----------------------------------------------------------------------------
    def setup(self) -> None:
        self.say(f"{NAME}: outbox, topic and raw files (flush {self.cdc.flush_interval_ms} ms)")
        self.pipeline.setup(self._refresh)  # the snapshot: the table's first commit, not counted
        self.window = {k: [] for k in self.window}

    def close(self) -> None:
        self.stop_workload()
        self.instance.dispose()

    def _refresh(self) -> bool:
        """One ``lake_refresh`` run; whether it made a commit. Its step times go to the window."""
        t0 = time.monotonic()
        result = materialize(self.assets, resources=self.resources, instance=self.instance)
        wall = time.monotonic() - t0
        if not result.success:
            raise RuntimeError(f"{NAME}: the lake refresh run {result.run_id} failed")
        steps = {
            e.step_key: e.event_specific_data.duration_ms / 1000  # type: ignore[union-attr]
            for e in result.all_events
            if e.event_type_value == "STEP_SUCCESS"
        }
        for ev in result.get_asset_check_evaluations():
            if not ev.passed and ev.severity == dg.AssetCheckSeverity.ERROR:
                name = ev.check_name
                self.failed_checks[name] = self.failed_checks.get(name, 0) + 1
            if ev.check_name == RESCAN_CHECK and ev.metadata["compared_now"].value:
                self.rescans.append(ev.passed)
        mat = next(
            e.materialization
            for e in result.get_asset_materialization_events()
            if e.materialization.asset_key == HUDI_KEY
        )
        if not mat.metadata[UpsertReport.NEW_COMMIT].value:
            self.runs_without_commit += 1
            return False
        self.window["hudi"].append(steps.get(hudi_op(HUDI_KEY), math.nan))
        self.window["items"].append(steps.get(hudi_op(ORDER_ITEMS_KEY), math.nan))
        self.window["run"].append(wall)
        return True

    # --- workload ----------------------------------------------------------------------------
    def start_workload(self) -> None:
        postgres = self.postgres

        def loop() -> None:
            try:
                conn = postgres.connect()
                try:
                    work, start, i = Workload(conn, seed=self.seed), time.monotonic(), 0
                    while not self._stop.is_set():
                        if work.step():
                            self.changes += 1
                        i += 1
                        self._stop.wait(max(0.0, start + i / self.rate - time.monotonic()))
                finally:
                    conn.close()
            except BaseException as e:  # a soak without its workload would measure nothing
                self._worker_error = e

        self._worker = threading.Thread(target=loop, name=f"{NAME}-workload", daemon=True)
        self._worker.start()

    def stop_workload(self) -> None:
        self._stop.set()
        if self._worker is not None:
            self._worker.join(timeout=60)
            self._worker = None

    def _raise_workload_error(self) -> None:
        if self._worker_error is not None:
            raise RuntimeError(
                f"the soak's workload failed after {self.changes} changes: {self._worker_error}"
            ) from self._worker_error

    # --- the soak ----------------------------------------------------------------------------
    def run(self, commits: int, sample_every: int, max_minutes: float = math.inf) -> None:
        """Tick and refresh until ``commits`` commits or ``max_minutes``, whichever comes first,
        sampling every ``sample_every`` commits."""
        self.sample()
        self.start_workload()
        start = time.monotonic()
        next_tick = start + self.period
        while self.commits < commits and time.monotonic() - start < max_minutes * 60:
            self._raise_workload_error()
            time.sleep(max(0.0, next_tick - time.monotonic()))
            if self.pipeline.tick() and self._refresh():
                self.commits += 1
                if self.commits % sample_every == 0:
                    self.sample()
            # Ticks that fell while the run was in flight are skipped, as the daemon skips them.
            now = time.monotonic()
            next_tick += self.period * max(1, math.ceil((now - next_tick) / self.period))
        self.stop_workload()
        self._raise_workload_error()
        if self.samples[-1].commits != self.commits:
            self.sample()

    def catch_up(self, timeout_s: float = 300) -> bool:
        """With the workload stopped: refresh until the lake has every record of the topic,
        then once more; whether that run's ``matches_source`` passed."""
        failed_before = self.failed_checks.get("matches_source", 0)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.pipeline.caught_up():
                break
            time.sleep(self.period)
            if self.pipeline.tick():
                self.commits += self._refresh()
        result = materialize(self.assets, resources=self.resources, instance=self.instance)
        matched = [
            ev.passed
            for ev in result.get_asset_check_evaluations()
            if ev.check_name == "matches_source"
        ]
        return bool(matched and all(matched)) and failed_before == self.failed_checks.get(
            "matches_source", 0
        )

    def prune(self, keep_newest: int) -> list[Figure]:
        """``dagster_runs_prune``'s rules on the soak's instance, every finished run old enough:
        how many runs it deleted, how long it took, and the instance's size before and after."""
        before_mb = _dir_mb(self.home)
        runs = self.instance.get_runs_count()
        t0 = time.monotonic()
        checks = [k for d in self.assets for k in d.check_keys]
        cutoff = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
        pruned = prune_runs(self.instance, cutoff, keep_newest, checks)
        seconds = time.monotonic() - t0
        after_mb = _dir_mb(self.home)
        held = self.instance.get_latest_materialization_event(HUDI_KEY)
        state_kept = held is not None and lake_checkpoint(self.instance, HUDI_KEY) is not None
        self.say(f"{NAME}: pruned {len(pruned)} of {runs} runs in {seconds:.1f}s")
        return [
            Figure(NAME, "runs pruned (dagster_runs_prune's rules)", len(pruned), "",
                   "", f"of {runs}, keeping the newest {keep_newest}; in {seconds:.1f} s"),
            Figure(NAME, "Dagster instance after the prune", after_mb, "MB", "",
                   f"{before_mb:.1f} MB before; the lake's checkpoint "
                   + ("kept" if state_kept else "LOST")),
        ]  # fmt: skip

    # --- samples -----------------------------------------------------------------------------
    def _pids(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for name in SERVERS:
            svc = self.stack.service(name)
            if isinstance(svc, LakeServer):
                health = svc.health()
                out[name] = [int(health["pid"]), int(health["jvm_pid"])]
            else:
                pid = self.stack.pidfile(svc).read()
                out[name] = [pid] if pid else []
        return out

    def _hoodie_files(self) -> tuple[int, int, int, int]:
        lake = self.resources["lake"]
        table_prefix = lake.table_prefix_of(OUTBOX)
        prefix = table_prefix.strip("/") + "/"
        timeline = timeline_prefix(table_prefix)[len(prefix) :]  # ".hoodie/timeline/"
        counts = {"timeline": 0, "history": 0, "metadata": 0, "data": 0}
        pages = self.s3.get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket=lake.lake_bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(prefix) :]
                if rel.startswith(f"{timeline}history/"):
                    counts["history"] += 1
                elif rel.startswith(timeline):
                    counts["timeline"] += 1
                elif rel.startswith(".hoodie/metadata/"):
                    counts["metadata"] += 1
                elif not rel.startswith(".hoodie/"):
                    counts["data"] += 1
        return counts["timeline"], counts["history"], counts["metadata"], counts["data"]

    def _wal_and_lag(self) -> tuple[float, int]:
        """The WAL the slot retains (MB) and the records the S3 sink has not committed: what the
        ``replication_slot_lag`` and ``sink_consumer_lag`` checks read."""
        conn = self.postgres.connect()
        try:
            lag = slot_lag(conn, self.cdc.slot_name)
        finally:
            conn.close()
        behind = consumer_lag(
            self.resources["kafka"].client_conf(),
            self.cdc.sink_consumer_group,
            self.cdc.topic_of(OUTBOX),
        )
        wal = lag.restart_lag_bytes if lag is not None else None
        return (wal / 1e6 if wal is not None else math.nan), sum(behind.values())

    def sample(self) -> Sample:
        server = self.stack.service("lake_server")
        assert isinstance(server, LakeServer)
        memory = server.memory()
        pids = self._pids()
        timeline, history, metadata, data = self._hoodie_files()
        wal, lag = self._wal_and_lag()
        history_dir = self.home / "history"
        sample = Sample(
            commits=self.commits,
            minutes=round((time.monotonic() - self.t0) / 60, 1),
            load=round(os.getloadavg()[0], 2),
            hudi_s=_median(self.window["hudi"]),
            items_s=_median(self.window["items"]),
            run_s=_median(self.window["run"]),
            server_rss_mb=rss_mb(pids["lake_server"][0]) or math.nan,
            heap_mb=float(memory["heap_used_mb"]),
            jvm_threads=int(memory["jvm_threads"]),
            threads={n: sum(_proc_count(p, "task") for p in ps) for n, ps in pids.items()},
            fds={n: sum(_proc_count(p, "fd") for p in ps) for n, ps in pids.items()},
            timeline_files=timeline,
            archived_files=history,
            metadata_files=metadata,
            data_files=data,
            dagster_mb=round(_dir_mb(self.home), 2),
            event_log_mb=round(_dir_mb(history_dir), 2) if history_dir.exists() else 0.0,
            runs=self.instance.get_runs_count(),
            wal_retained_mb=wal,
            sink_lag=lag,
        )
        self.samples.append(sample)
        if self.samples_file is not None:
            with self.samples_file.open("a") as f:
                f.write(json.dumps(asdict(sample)) + "\n")
        self.window = {k: [] for k in self.window}
        self.say(
            f"{NAME}: commit {sample.commits}: hudi {sample.hudi_s:.1f}s items "
            f"{sample.items_s:.1f}s, server RSS {sample.server_rss_mb:.0f} MB heap "
            f"{sample.heap_mb:.0f} MB, timeline {timeline} files, dagster {sample.dagster_mb:.1f} "
            f"MB, load {sample.load}"
        )
        return sample


def samples_table(samples: list[Sample]) -> str:
    """The samples as a markdown table (for the docs and the run's output)."""
    head = (
        "| commits | min | load | hudi s | items s | run s | server RSS MB | heap MB | "
        "threads (lake/connect/kafka) | fds (lake/connect/kafka) | timeline | archived | "
        "metadata | data files | dagster MB | event log MB | runs | WAL MB | sink lag |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for s in samples:
        threads = "/".join(str(s.threads.get(n, 0)) for n in SERVERS)
        fds = "/".join(str(s.fds.get(n, 0)) for n in SERVERS)
        lines.append(
            f"| {s.commits} | {s.minutes} | {s.load} | {s.hudi_s:.2f} | {s.items_s:.2f} | "
            f"{s.run_s:.2f} | {s.server_rss_mb:.0f} | {s.heap_mb:.0f} | {threads} | {fds} | "
            f"{s.timeline_files} | {s.archived_files} | {s.metadata_files} | {s.data_files} | "
            f"{s.dagster_mb:.1f} | {s.event_log_mb:.1f} | {s.runs} | {s.wal_retained_mb:.1f} | "
            f"{s.sink_lag} |"
        )
    return "\n".join(lines)


def growth(samples: list[Sample], value: Callable[[Sample], float]) -> tuple[Sample, float]:
    """The sample at a tenth of the run (warm-up over) and the last one's ratio to it."""
    last = samples[-1]
    target = last.commits / 10
    base = min(
        (s for s in samples if s.commits >= max(1, target)), key=lambda s: s.commits, default=last
    )
    b = value(base)
    return base, (value(last) / b if b else math.nan)


def bench_soak(
    stack: LocalStack,
    commits: int,
    sample_every: int,
    rate: float,
    say: Callable[[str], None],
    max_minutes: float = math.inf,
    samples_file: Path | None = None,
) -> tuple[list[Figure], list[Sample]]:
    os.environ.update(local_secret_env(stack.settings))
    soak = Soak(stack, say, rate=rate, samples_file=samples_file)
    try:
        soak.setup()
        say(
            f"{NAME}: {commits} commits (at most {max_minutes:g} min) at {rate} change/s, "
            f"a sample every {sample_every}"
        )
        soak.run(commits, sample_every, max_minutes)
        matched = soak.catch_up()
        final = soak.sample()
        pruned = soak.prune(keep_newest=max(2, sample_every))
    finally:
        soak.close()
    return _figures(soak, matched, final) + pruned, soak.samples


def _figures(soak: Soak, matched: bool, final: Sample) -> list[Figure]:
    samples = [s for s in soak.samples if s.commits > 0 and s is not final] or soak.samples
    how = f"{soak.commits} commits, {soak.changes} changes at {soak.rate}/s"
    figures: list[Figure] = []
    goal = f"<= {GROWTH_GOAL:.2f}x"
    for label, value, unit in (
        ("Hudi step", lambda s: s.hudi_s, "s"),
        ("order items step", lambda s: s.items_s, "s"),
        ("lake server RSS", lambda s: s.server_rss_mb, "MB"),
        ("lake server heap after GC", lambda s: s.heap_mb, "MB"),
        ("lake server threads", lambda s: float(s.threads["lake_server"]), ""),
        ("lake server fds", lambda s: float(s.fds["lake_server"]), ""),
        ("Connect threads", lambda s: float(s.threads["connect"]), ""),
        ("Kafka fds", lambda s: float(s.fds["kafka"]), ""),
        ("active timeline files", lambda s: float(s.timeline_files), ""),
        ("metadata table files", lambda s: float(s.metadata_files), ""),
    ):
        base, ratio = growth(samples, value)
        last = samples[-1]
        figures.append(
            Figure(NAME, f"{label}: last / at commit {base.commits}", ratio, "x", goal,
                   f"{value(base):,.1f} -> {value(last):,.1f} {unit} (load {base.load} -> "
                   f"{last.load})")
        )  # fmt: skip
    first, last = samples[0], samples[-1]
    runs = max(1, last.runs - first.runs)
    figures += [
        Figure(NAME, "Dagster instance per run", (last.dagster_mb - first.dagster_mb) / runs * 1e3,
               "kB", "linear", f"{first.dagster_mb:.1f} -> {last.dagster_mb:.1f} MB over {runs} "
               "runs"),
        Figure(NAME, "runs without a commit", soak.runs_without_commit, "", "", how),
        Figure(NAME, "checks failed with ERROR", sum(soak.failed_checks.values()), "", "0",
               ", ".join(f"{k}: {v}" for k, v in sorted(soak.failed_checks.items()))),
        Figure(NAME, "full scans: incremental matches rescan", sum(soak.rescans), "",
               "all", f"of {len(soak.rescans)}"),
        Figure(NAME, "matches_source after catch-up", float(matched), "", "1",
               f"WAL retained {final.wal_retained_mb:.1f} MB, sink lag {final.sink_lag}"),
    ]  # fmt: skip
    return figures
