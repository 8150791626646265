"""The lake server as a stack service: a warm Spark session that runs the lake's Spark apps
(``cdc_lake/stack/lake_server.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from cdc_lake.stack import lake_server
from cdc_lake.stack.process import StackError
from cdc_lake.stack.services.base import Service, require_java


class LakeServer(Service):
    """The lake server: this package's Python running ``cdc_lake.stack.lake_server``, which
    builds one Spark session (Hudi, s3a on the stack's S3) and serves the lake's Spark apps on
    loopback to the local Spark launcher. Its token is a 0600 file in ``conf/`` (``prepare``);
    its argv names the state directory, ports base and jars; its environment holds no secret:
    it reads the S3 keys from ``credentials.json`` itself. Started last, after S3."""

    name = lake_server.SERVICE
    ports = (lake_server.SERVICE,)

    @property
    def token_file(self) -> Path:
        return lake_server.token_path(self.s)

    def prepare(self) -> None:
        lake_server.ensure_token(self.s)
        self.s.data_dir(self.name).mkdir(mode=0o700, parents=True, exist_ok=True)

    def cwd(self) -> Path | None:
        # Whatever Spark or Hudi drop in the working directory stays in the state directory.
        return self.s.data_dir(self.name)

    def argv(self) -> list[str]:
        if not self.s.spark_jars():
            raise StackError(
                f"{self.name}: no Hudi/s3a jars in {self.s.classpath_dir('spark')}. "
                "Fix: run `cdc-lake stack install` first."
            )
        require_java()
        return [
            sys.executable,
            # Not -m: the package imports the module, which runpy would then run a second time.
            "-c",
            "import sys; from cdc_lake.stack.lake_server import main; sys.exit(main())",
            "--state-dir",
            str(self.s.state_dir),
            "--port-base",
            str(self.s.port_base),
            "--jars-dir",
            str(self.s.jars_dir),
        ]

    def health(self) -> dict[str, int]:
        """The server's pid, its JVM's pid and how many apps it has run."""
        return lake_server.request(
            self.s.host, self.s.port(self.name), self.token_file, "GET", "/health", timeout_s=3
        )

    def memory(self) -> dict[str, float]:
        """The JVM's heap after a full GC, and the live threads (``GET /memory``); waits for an
        app in flight."""
        return lake_server.request(
            self.s.host, self.s.port(self.name), self.token_file, "GET", "/memory", timeout_s=600
        )

    def healthy(self) -> bool:
        return bool(self.health()["jvm_pid"])

    def details(self) -> dict[str, object]:
        return {"endpoint": self.endpoint, "token_file": str(self.token_file)}
