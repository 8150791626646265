"""Play EMR's part for moto: run each submitted step or job run's spark-submit on local Spark.

moto records EMR steps and EMR Serverless job runs but runs nothing, and never moves their state.
The simulator watches moto's backend (moto's server runs in this process), takes what was
submitted, and runs it as EMR would: the entry point and the ``--py-files`` zip are downloaded
from S3 where the resource uploaded them, and ``spark-submit`` runs with the submitted confs and
arguments. Then the step or job run gets the state EMR would give it, from the exit code.

Only what cannot exist here is swapped, and each swap is recorded:
- ``--jars /usr/lib/hudi/...`` (the EMR image's Hudi bundle) becomes the locally installed Hudi
  bundle and s3a jars, plus the local s3a settings;
- ``--deploy-mode cluster`` is dropped: local Spark runs Python drivers in client mode.

The Python that runs the driver is started with ``-S``: the project's editable install is then
invisible, so ``cdc_lake`` can only come from the uploaded zip.
"""

from __future__ import annotations

import gzip
import os
import shlex
import subprocess
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.emr.models import emr_backends
from moto.emrserverless.models import emrserverless_backends

from cdc_lake.resources.spark_cluster import SITE_PACKAGES, shipped_python
from cdc_lake.stack.settings import StackSettings
from cdc_lake.stack.spark import spark_conf

DRIVER_ENV = "spark.emr-serverless.driverEnv."


@dataclass
class Execution:
    submitted: list[str]
    command: list[str]
    returncode: int
    stdout: str
    stderr: str


@dataclass
class EmrSimulator:
    settings: StackSettings
    s3_client: Any
    region: str
    executions: list[Execution] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _seen: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._workdir = Path(tempfile.mkdtemp(prefix="cdc-lake-emr-sim-"))
        self._python = shipped_python(self._workdir)

    def __enter__(self) -> EmrSimulator:
        # Only what is submitted from now on: a step or job run that an earlier test left in
        # moto's backend is not played again.
        self._seen |= {s.id for c in self._emr().clusters.values() for s in c.steps}
        self._seen |= {r.id for runs in self._serverless().job_runs.values() for r in runs}
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    # --- watching moto -----------------------------------------------------------------------
    def _emr(self) -> Any:
        return emr_backends[DEFAULT_ACCOUNT_ID][self.region]

    def _serverless(self) -> Any:
        return emrserverless_backends[DEFAULT_ACCOUNT_ID][self.region]

    def _loop(self) -> None:
        while not self._stop.is_set():
            for cluster in list(self._emr().clusters.values()):
                for step in list(cluster.steps):
                    if step.id not in self._seen and step.state in ("PENDING", "RUNNING"):
                        self._seen.add(step.id)
                        self._guarded(self._run_step, step, _fail_step)
            for runs in list(self._serverless().job_runs.values()):
                for run in list(runs):
                    if run.id not in self._seen and run.state == "SCHEDULED":
                        self._seen.add(run.id)
                        self._guarded(self._run_serverless, run, _fail_job_run)
            time.sleep(0.2)

    def _guarded(self, play: Any, submitted: Any, fail: Any) -> None:
        """A simulator error fails the step or job run (with the traceback as an execution),
        rather than leaving it pending for the client to poll forever."""
        try:
            play(submitted)
        except Exception:
            error = traceback.format_exc()
            self.executions.append(Execution([], [], -1, "", error))
            fail(submitted, error[-500:])

    def _run_step(self, step: Any) -> None:
        args = list(step.args)
        assert step.jar == "command-runner.jar" and args[0] == "spark-submit", step.args
        code = self._spark_submit(args[1:], env={})
        self._upload_step_logs(step)
        step.state = "COMPLETED" if code == 0 else "FAILED"
        if code:
            step.last_state_change_reason = f"spark-submit exited with {code}"

    def _run_serverless(self, run: Any) -> None:
        driver = run.job_driver["sparkSubmit"]
        params = shlex.split(driver.get("sparkSubmitParameters", ""))
        env, rest = {}, []
        i = 0
        while i < len(params):
            if params[i] == "--conf" and params[i + 1].startswith(DRIVER_ENV):
                key, _, value = params[i + 1].removeprefix(DRIVER_ENV).partition("=")
                env[key] = value
                i += 2
                continue
            rest.append(params[i])
            i += 1
        code = self._spark_submit([*rest, driver["entryPoint"],
                                   *driver.get("entryPointArguments", [])], env)  # fmt: skip
        run.state = "SUCCESS" if code == 0 else "FAILED"
        if code:
            run.state_details = f"spark-submit exited with {code}"

    def _upload_step_logs(self, step: Any) -> None:
        """stdout and stderr, gzipped where EMR puts a step's logs under the cluster's LogUri."""
        cluster = next(c for c in self._emr().clusters.values() if step in c.steps)
        if not cluster.log_uri:
            return
        bucket, _, prefix = cluster.log_uri.removeprefix("s3://").partition("/")
        last = self.executions[-1]
        for name, text in (("stdout", last.stdout), ("stderr", last.stderr)):
            key = f"{prefix.rstrip('/')}/{cluster.id}/steps/{step.id}/{name}.gz".lstrip("/")
            self.s3_client.put_object(Bucket=bucket, Key=key, Body=gzip.compress(text.encode()))

    # --- running it --------------------------------------------------------------------------
    def _fetch(self, uri: str) -> str:
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        target = self._workdir / key.replace("/", "_")
        self.s3_client.download_file(bucket, key, str(target))
        return str(target)

    def _spark_submit(self, args: list[str], env: dict[str, str]) -> int:
        local_conf = spark_conf(self.settings)
        cmd = [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"), "--master", "local[2]"]
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--deploy-mode":
                i += 2
                continue
            if arg == "--jars":
                cmd += ["--jars", local_conf["spark.jars"]]
                i += 2
                continue
            if arg == "--py-files":
                cmd += ["--py-files", self._fetch(args[i + 1])]
                i += 2
                continue
            if arg == "--conf":
                cmd += ["--conf", args[i + 1]]
                i += 2
                continue
            # The entry point, then its own arguments.
            cmd += [self._fetch(arg) if arg.startswith("s3://") else arg for arg in args[i:]]
            break
        for key in ("spark.driver.memory", "spark.sql.session.timeZone",
                    "spark.driver.extraJavaOptions", "spark.ui.enabled"):  # fmt: skip
            cmd[3:3] = ["--conf", f"{key}={local_conf[key]}"]
        for key, value in local_conf.items():
            if key.startswith("spark.hadoop.fs.s3a."):
                cmd[3:3] = ["--conf", f"{key}={value}"]
        run_env = {
            **os.environ,
            **env,
            "PYSPARK_PYTHON": str(self._python),
            "PYSPARK_DRIVER_PYTHON": str(self._python),
            "PYTHONPATH": SITE_PACKAGES,
            "AWS_ENDPOINT_URL_S3": self.settings.s3_endpoint,
            "AWS_DEFAULT_REGION": self.region,
        }
        proc = subprocess.run(
            cmd, env=run_env, cwd=self._workdir, capture_output=True, text=True, timeout=600
        )
        self.executions.append(
            Execution(args, cmd, proc.returncode, proc.stdout[-20000:], proc.stderr[-20000:])
        )
        return proc.returncode


def _fail_step(step: Any, reason: str) -> None:
    step.state, step.last_state_change_reason = "FAILED", reason


def _fail_job_run(run: Any, reason: str) -> None:
    run.state, run.state_details = "FAILED", reason
