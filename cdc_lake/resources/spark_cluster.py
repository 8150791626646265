"""``SparkClusterLauncher``: the lake's Spark apps as applications on the local stack's Spark
standalone cluster (``CDC_LAKE_LOCAL_SPARK=cluster``; the cluster is
``cdc_lake/stack/spark_cluster.py``).

Each run goes the way an EMR step does: the apps are packaged (``build_package``: the entry point
and the ``--py-files`` zip), and ``spark-submit`` starts the entry point with the Pipes context,
the lake's session settings and the jars. The driver runs here (client mode, as a step's driver
runs on the primary node); its executors run on the workers, in JVMs of their own. The Python
that runs the driver and the executors' workers is started with ``-S``: this project's install
is then invisible to it, so ``cdc_lake`` can only come from the shipped zip, as on EMR.

Pipes: the context in a temporary file, the messages in another (the driver is on this host);
the driver's log is ``<state>/logs/spark-apps/<app>-<run id>.log``, the last ``KEPT_LOGS`` kept.
A failed application fails the step with spark-submit's exit code and the log's last lines.
Nothing of it is half-committed: the apps commit to Hudi only once the whole batch is valid,
and an application cut short leaves an inflight instant that the next write rolls back.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import dagster as dg
import pyspark
from dagster._core.pipes.client import PipesClientCompletedInvocation

from cdc_lake.resources.spark import (
    AppContext,
    SparkLauncher,
    SparkOutcome,
    op_context,
    outcome_from_pipes,
    spark_submit_args,
)
from cdc_lake.spark_apps.entry import APP_EXTRA, PARAMS_EXTRA
from cdc_lake.spark_apps.package import build_package
from cdc_lake.spark_apps.params import AppParams
from cdc_lake.stack.process import server_env, tail
from cdc_lake.stack.settings import StackSettings
from cdc_lake.stack.spark import S3A_PROFILE, write_s3a_profile
from cdc_lake.stack.spark_cluster import SPARK_HOME, app_conf, app_properties

# The driver logs kept per app (``<state>/logs/spark-apps/<app>-<run id>.log``).
KEPT_LOGS = 20
# Where pyspark, boto3 and the other dependencies are; the project itself is not there.
SITE_PACKAGES = str(Path(pyspark.__file__).resolve().parent.parent)


def shipped_python(directory: Path) -> Path:
    """A Python for a Spark driver and its workers that sees this environment's dependencies
    (with ``PYTHONPATH=SITE_PACKAGES``) but not the project's own install (``-S``: no .pth file
    is read), so ``cdc_lake`` can only come from the ``--py-files`` zip, as on EMR."""
    python = directory / "python-no-site"
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "$@"\n')
    python.chmod(0o700)
    return python


class SparkClusterLauncher(SparkLauncher):
    """The app as an application on the stack's standalone cluster, through spark-submit."""

    state_dir: str
    jars_dir: str
    port_base: int
    timeout_s: float = 1800.0

    @staticmethod
    def of(settings: StackSettings) -> SparkClusterLauncher:
        return SparkClusterLauncher(
            state_dir=str(settings.state_dir),
            jars_dir=str(settings.jars_dir),
            port_base=settings.port_base,
        )

    def stack_settings(self) -> StackSettings:
        return StackSettings(
            state_dir=Path(self.state_dir),
            jars_dir=Path(self.jars_dir),
            port_base=self.port_base,
            spark_mode="cluster",
        )

    def command(self, s: StackSettings, workdir: Path) -> list[str]:
        """spark-submit of the packaged entry point: the secret in a 0600 properties file, the
        rest as arguments (none of them a secret)."""
        package = build_package(workdir)
        python = shipped_python(workdir)
        jars = tuple(str(j) for j in s.spark_jars())
        return [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            s.spark_master_url,
            "--deploy-mode",
            "client",
            "--properties-file",
            str(app_properties(s)),
            *spark_submit_args(str(package.archive), app_conf(s, str(python)), jars),
            str(package.entry_point),
        ]

    def environment(self, s: StackSettings) -> dict[str, str]:
        """The driver's: paths and names, no key. boto3 (the Pipes writer, the apps' own S3
        reads) and s3a read the stack's keys from the 0600 profile file."""
        profile = str(write_s3a_profile(s))
        return server_env({
            "SPARK_HOME": str(SPARK_HOME),
            "PYTHONPATH": SITE_PACKAGES,
            "AWS_SHARED_CREDENTIALS_FILE": profile,
            "AWS_CREDENTIAL_PROFILES_FILE": profile,
            "AWS_PROFILE": S3A_PROFILE,
            "AWS_ENDPOINT_URL_S3": s.s3_endpoint,
            "AWS_DEFAULT_REGION": s.region,
            "SPARK_LOCAL_IP": s.host,
        })  # fmt: skip

    def log_path(self, s: StackSettings, app: str, run_id: str) -> Path:
        """This run's driver log; the logs of the app's older runs beyond ``KEPT_LOGS`` go."""
        logs = s.logs_dir / "spark-apps"
        logs.mkdir(mode=0o700, parents=True, exist_ok=True)
        older = sorted(logs.glob(f"{app}-*.log"), key=lambda p: p.stat().st_mtime)
        for stale in older[: max(0, len(older) - KEPT_LOGS + 1)]:
            stale.unlink(missing_ok=True)
        return logs / f"{app}-{run_id[:8]}.log"

    def submit(self, command: list[str], env: dict[str, str], cwd: Path, log: Path) -> int:
        """spark-submit in a process group of its own (the JVM and the Python driver it
        starts), which goes whole on a timeout or when the step is interrupted."""
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            proc = subprocess.Popen(
                command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            try:
                return proc.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired as e:
                raise dg.Failure(
                    f"the Spark app did not finish in {self.timeout_s:.0f}s; stopped. Log: {log}"
                ) from e
            finally:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

    def run(self, context: AppContext, params: AppParams) -> SparkOutcome:
        s = self.stack_settings()
        pipes_context = op_context(context)
        log = self.log_path(s, params.APP, pipes_context.run.run_id)
        work_root = s.data_dir("spark_apps")
        work_root.mkdir(mode=0o700, parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix=f"{params.APP}-", dir=work_root))
        try:
            command = self.command(s, workdir)
            with dg.open_pipes_session(
                context=pipes_context,
                context_injector=dg.PipesTempFileContextInjector(),
                message_reader=dg.PipesTempFileMessageReader(),
                extras={APP_EXTRA: params.APP, PARAMS_EXTRA: params.to_json()},
            ) as session:
                env = {**self.environment(s), **session.get_bootstrap_env_vars()}
                code = self.submit(command, env, workdir, log)
                if code:
                    raise dg.Failure(
                        description=f"the {params.APP} app failed on the Spark cluster "
                        f"{s.spark_master_url}: spark-submit exited with {code}. Log: {log}\n"
                        f"--- last lines ---\n{tail(log)}",
                        metadata={"log": dg.MetadataValue.path(str(log)), "exit_code": code},
                    )
            invocation = PipesClientCompletedInvocation(
                session,
                metadata={
                    "spark_master": dg.MetadataValue.text(s.spark_master_url),
                    "spark_app_log": dg.MetadataValue.path(str(log)),
                },
            )
            return outcome_from_pipes(invocation)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
