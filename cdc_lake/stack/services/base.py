"""What every server of the stack shares: ``Service`` (prepare its state, the command that runs it
in the foreground, health, what to do once healthy) and ``JavaService`` (a JVM with our
logging configs), and finding Java.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from cdc_lake.stack.process import StackError
from cdc_lake.stack.settings import StackSettings

LOG4J2_PROPERTIES = """\
status = warn
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
"""

# S3Proxy logs through logback, which defaults to DEBUG without a config.
LOGBACK_XML = """\
<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>[%d] %level %msg \\(%logger\\)%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
"""


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise StackError(
            "Java 17 or newer is needed by Kafka, Kafka Connect, S3Proxy and Spark, and no `java` "
            "is on PATH. Fix: apt-get install -y openjdk-17-jre-headless (or set JAVA_HOME)."
        )
    return found


def java_major_version(java: str) -> int:
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    # e.g. openjdk version "17.0.15" 2025-04-15
    for token in out.split():
        token = token.strip('"')
        if token[:1].isdigit():
            major = token.split(".")[0]
            return int(major if major != "1" else token.split(".")[1])
    raise StackError(f"Could not read the Java version from `{java} -version`: {out.strip()}")


def require_java() -> str:
    java = java_binary()
    major = java_major_version(java)
    if major < 17:
        raise StackError(
            f"{java} is Java {major}; Kafka 4 and S3Proxy need Java 17 or newer. "
            "Fix: apt-get install -y openjdk-17-jre-headless and put it first on PATH "
            "(or set JAVA_HOME)."
        )
    return java




class Service:
    name: str = ""
    ports: tuple[str, ...] = ()
    stop_signal: int = signal.SIGTERM
    run_as: str | None = None

    def __init__(self, settings: StackSettings):
        self.s = settings

    @property
    def log(self) -> Path:
        return self.s.logs_dir / f"{self.name}.log"

    @property
    def endpoint(self) -> str:
        return f"{self.s.host}:{self.s.port(self.ports[0])}"

    def fix_hint(self) -> str:
        return f"read {self.log}"

    def prepare(self) -> None:
        """Write config and initialise data on first start. Must be idempotent."""

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return {}

    def cwd(self) -> Path | None:
        """Where the server runs; None: where ``up`` was called."""
        return None

    def healthy(self) -> bool:
        raise NotImplementedError

    def after_healthy(self) -> None:
        """Provision what clients expect (roles, buckets); idempotent."""

    def details(self) -> dict[str, object]:
        return {"endpoint": self.endpoint}


class JavaService(Service):
    main_class = ""
    classpath = ""
    heap = "512m"

    def jvm_options(self) -> list[str]:
        """Extra JVM options: paths and switches only, never a secret (argv is public)."""
        return []

    def java_argv(self, *args: str) -> list[str]:
        cp_dir = self.s.classpath_dir(self.classpath)
        if not any(cp_dir.glob("*.jar")):
            raise StackError(
                f"{self.name}: no jars in {cp_dir}. Fix: run `cdc-lake stack install` first."
            )
        return [
            require_java(),
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.s.conf_dir / 'log4j2.properties'}",
            f"-Dlogback.configurationFile={self.s.conf_dir / 'logback.xml'}",
            *self.jvm_options(),
            "-cp",
            f"{cp_dir}/*",
            self.main_class,
            *args,
        ]

    def prepare(self) -> None:
        self.s.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.s.conf_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        (self.s.conf_dir / "logback.xml").write_text(LOGBACK_XML)
