"""The local stack's lake server as a ``SparkLauncher`` (``cdc_lake/stack/lake_server.py``).

Only the local resource set imports this module, so loading the production set
(``cdc_lake/resources/prod.py``) never loads the local stack (an import contract in
``pyproject.toml`` holds it). A failed app raises ``dg.Failure`` naming the app, with its error
and traceback; a server that does not answer raises one that says to run ``cdc-lake stack up``.
"""

from __future__ import annotations

import time

import dagster as dg

from cdc_lake.resources.spark import AppContext, SparkLauncher, SparkOutcome, outcome_from_report
from cdc_lake.spark_apps.params import AppParams
from cdc_lake.spark_apps.report import AppReport
from cdc_lake.stack.lake_server import LakeServerError, request


class LocalServerSparkLauncher(SparkLauncher):
    """The app on the local stack's lake server: its JSON parameters go over loopback, its
    ``AppReport`` comes back (see ``cdc_lake/stack/lake_server.py``). No JVM in this process."""

    host: str = "127.0.0.1"
    port: int
    token_file: str  # a path: the token is read when an app runs, never held in config
    timeout_s: float | None = None  # an app takes as long as its batch; None waits for it

    def run(self, context: AppContext, params: AppParams) -> SparkOutcome:
        app = params.APP
        where = f"{self.host}:{self.port}"
        context.log.info(f"{app}: running on the lake server at {where}")
        t0 = time.monotonic()
        try:
            answer = request(
                self.host,
                self.port,
                self.token_file,
                "POST",
                "/run",
                {"app": app, "params": params.to_json()},
                timeout_s=self.timeout_s,
            )
        except LakeServerError as e:
            raise dg.Failure(
                description=f"the {app} app could not run: {e}. Fix: start the local stack, "
                "which starts the lake server: `cdc-lake stack up` (or run Spark in the "
                "Dagster process: CDC_LAKE_LOCAL_SPARK=in_process)."
            ) from e
        took = time.monotonic() - t0
        if not answer["ok"]:
            context.log.error(f"{app}: failed on the lake server after {answer['seconds']:.1f}s")
            raise dg.Failure(
                description=f"the {app} app failed on the lake server: {answer['error']}",
                metadata={"app": app, "traceback": dg.MetadataValue.text(answer["traceback"])},
            )
        context.log.info(
            f"{app}: done in {answer['seconds']:.1f}s on the lake server ({took:.1f}s here)"
        )
        report = answer["report"]
        return outcome_from_report(AppReport(report["metadata"], report["checks"]))
