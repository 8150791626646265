"""``cdc-lake stack install``: the Debian packages and JVM jars the local stack runs.

- PostgreSQL (and Java 17 and Maven, when missing) come from Debian's packages via apt-get,
  which needs root. Without root, a missing package is reported with the command to run.
- ``cdc-lake stack install`` also installs Debian's ``chromium`` the same way: the browser tests
  drive it with Playwright (never ``playwright install``, which downloads browsers). The demo
  does not need it. Debian's ``nodejs`` likewise when no ``node`` is on the PATH: the CDK app
  (``cdc_lake/infra``) synthesises on it.
- Every jar comes from Maven Central through the poms in ``cdc_lake/stack/maven`` (versions are
  written down there, once), copied into one directory per classpath under the jars directory.
  Our own S3 sink connector (``connectors/s3-sink``), Connect REST guard
  (``connectors/rest-guard``) and the Spark cluster's UI guard (``connectors/spark-ui-guard``)
  are compiled by the same Maven run.

A second install with unchanged poms and sources does nothing: a stamp of their content is kept
beside the jars.

Optional classpaths (``OPTIONAL``) are not part of it: each is a module in a Maven profile of
the same name, resolved by ``install_optional`` only for what needs it, into its own directory
with its own stamp. ``iceberg-connect`` is Apache Iceberg's Kafka Connect sink (about 80 MB,
``plugins/iceberg``), which the ``connect-iceberg`` benchmark installs; a Connect worker started
after that loads it like the other plugins, and nothing else uses it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from cdc_lake.stack.process import StackError
from cdc_lake.stack.services import postgres_bindir, require_java
from cdc_lake.stack.settings import StackSettings, maven_dir, project_root

CLASSPATHS = (
    "kafka", "connect", "s3proxy", "spark", "peers", "plugins/debezium", "plugins/s3sink",
    "spark-ui-guard",
)  # fmt: skip
# Our own Java, under connectors/, compiled by the same Maven run.
CONNECTOR_SOURCES = ("s3-sink", "rest-guard", "spark-ui-guard")
# Optional classpaths: Maven profile and module name -> classpath directory.
OPTIONAL = {"iceberg-connect": "plugins/iceberg"}
_DOWNLOADED = re.compile(r"Downloaded from \S+: (\S+) \(([\d.]+) (B|kB|MB|GB)")
_BUILDING = re.compile(r"Building (.+?) \S+\s+\[(\d+)/(\d+)\]")
_UNIT = {"B": 1 / 1e6, "kB": 1 / 1e3, "MB": 1.0, "GB": 1e3}


def _say(msg: str) -> None:
    print(f"[install] {msg}", flush=True)


def _apt_install(packages: list[str], why: str) -> None:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise StackError(
            f"{why} is missing and cannot be installed without root and apt-get. "
            f"Fix: sudo apt-get install -y {' '.join(packages)}, "
            "then rerun `cdc-lake stack install`."
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _say(f"apt-get install {' '.join(packages)} ({why})")
    for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *packages]):
        result = subprocess.run(argv, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise StackError(
                f"`{' '.join(argv)}` failed while installing {why}:\n{result.stderr[-1500:]}\n"
                "Fix: check that Debian's package mirrors are reachable, then rerun "
                "`cdc-lake stack install`."
            )


def chromium_path() -> str | None:
    """Debian's Chromium, which the browser tests drive; None when it is not installed."""
    return shutil.which("chromium")


def ensure_system_packages(browser: bool = False) -> None:
    if not shutil.which("java"):
        _apt_install(["openjdk-17-jre-headless"], "Java 17")
    require_java()
    if not shutil.which("mvn"):
        _apt_install(["maven"], "Maven")
    if postgres_bindir() is None:
        _apt_install(["postgresql"], "PostgreSQL 15+")
        if postgres_bindir() is None:
            raise StackError("PostgreSQL was installed but no server 15+ was found.")
    if browser and chromium_path() is None:
        _apt_install(["chromium"], "Chromium (for the browser tests)")
    if browser and not shutil.which("node"):
        # The CDK app (cdc_lake/infra) synthesises on Node.js, in the tests too.
        _apt_install(["nodejs"], "Node.js (for the CDK app's synthesis)")


def _digest_of(roots: list[Path], skip: tuple[str, ...] = ()) -> str:
    h = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*") if root.is_dir() else [root]):
            rel = path.relative_to(root) if root.is_dir() else Path(path.name)
            if path.is_file() and "target" not in rel.parts and rel.parts[0] not in skip:
                h.update(str(rel).encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def _sources_digest() -> str:
    # The optional modules are not the default install's sources.
    roots = [maven_dir(), *(project_root() / "connectors" / m for m in CONNECTOR_SOURCES)]
    return _digest_of(roots, skip=tuple(OPTIONAL))


def _optional_digest(name: str) -> str:
    return _digest_of([maven_dir() / "pom.xml", maven_dir() / name])


def jars_installed(settings: StackSettings) -> bool:
    stamp = settings.jars_dir / ".installed"
    return (
        stamp.is_file()
        and stamp.read_text().strip() == _sources_digest()
        and all(any(settings.classpath_dir(c).glob("*.jar")) for c in CLASSPATHS)
    )


def resolve_jars(settings: StackSettings, maven_args: list[str] | None = None) -> None:
    if not shutil.which("mvn"):
        raise StackError("Maven (`mvn`) is not on PATH. Fix: apt-get install -y maven.")
    jars = settings.jars_dir
    for c in CLASSPATHS:  # versions may have changed: never mix old jars with new
        shutil.rmtree(jars / c, ignore_errors=True)
    jars.mkdir(parents=True, exist_ok=True)
    log = settings.logs_dir / "install-maven.log"
    files, mb = _run_maven(
        [*(maven_args or []), f"-Dcdc.jars.dir={jars}", "package", "dependency:copy-dependencies"],
        log,
        f"resolving jars from Maven Central into {jars}",
    )
    missing = [c for c in CLASSPATHS if not any(settings.classpath_dir(c).glob("*.jar"))]
    if missing:
        raise StackError(f"Maven finished but left no jars for {missing}; see {log}.")
    (jars / ".installed").write_text(_sources_digest() + "\n")
    held = sum(1 for _ in jars.rglob("*.jar"))
    _say(f"jars ready: {held} jars in {jars}; {_downloads(files, mb)}")


def optional_installed(settings: StackSettings, name: str) -> bool:
    stamp = settings.jars_dir / f".installed-{name}"
    return (
        stamp.is_file()
        and stamp.read_text().strip() == _optional_digest(name)
        and any(settings.classpath_dir(OPTIONAL[name]).glob("*.jar"))
    )


def install_optional(settings: StackSettings, name: str) -> None:
    """Resolve one optional classpath (``OPTIONAL``) into the jars directory, unless its jars
    are there for the module as it is now."""
    if optional_installed(settings, name):
        return
    if not shutil.which("mvn"):
        raise StackError("Maven (`mvn`) is not on PATH. Fix: apt-get install -y maven.")
    target = settings.classpath_dir(OPTIONAL[name])
    shutil.rmtree(target, ignore_errors=True)
    log = settings.logs_dir / f"install-maven-{name}.log"
    argv = [f"-P{name}", "-pl", name, "-am", f"-Dcdc.jars.dir={settings.jars_dir}",
            "dependency:copy-dependencies"]  # fmt: skip
    files, mb = _run_maven(argv, log, f"resolving {name} from Maven Central into {target}")
    if not any(target.glob("*.jar")):
        raise StackError(f"Maven finished but left no jars in {target}; see {log}.")
    (settings.jars_dir / f".installed-{name}").write_text(_optional_digest(name) + "\n")
    held = sum(1 for _ in target.glob("*.jar"))
    _say(f"{name} ready: {held} jars in {target}; {_downloads(files, mb)}")


def _downloads(files: int, mb: float) -> str:
    if not files:
        return "none downloaded: every one was in Maven's local repository (~/.m2)"
    return f"{files} files downloaded ({mb:.1f} MB), the rest from Maven's local repository"


def _run_maven(args: list[str], log: Path, what: str) -> tuple[int, float]:
    """Run Maven in the poms' directory, its output to ``log``, with progress; returns the files
    downloaded and their MB. A failure raises with Maven's first errors."""
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = ["mvn", "-B", "-DskipTests", *args]
    _say(f"{what} (log: {log})")
    files, mb, last_report = 0, 0.0, time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            argv,
            cwd=maven_dir(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if m := _BUILDING.search(line):
                # What Maven downloads is counted below; a cached jar is not a download.
                _say(f"  [{m.group(2)}/{m.group(3)}] {m.group(1)}")
            elif m := _DOWNLOADED.search(line):
                files += 1
                size = float(m.group(2)) * _UNIT[m.group(3)]
                mb += size
                if size >= 5 or time.monotonic() - last_report > 10:
                    last_report = time.monotonic()
                    name = m.group(1).rsplit("/", 1)[-1]
                    _say(f"      downloaded {name} ({size:.1f} MB; {mb:.1f} MB so far)")
        rc = proc.wait()
    if rc != 0:
        errors = [ln for ln in log.read_text().splitlines() if "[ERROR]" in ln][:8]
        raise StackError(
            "Maven could not resolve the stack's jars (a failed download or a missing artifact).\n"
            + "\n".join(errors)
            + f"\nFull log: {log}\nFix: check that Maven Central is reachable (proxy settings "
            "in ~/.m2/settings.xml), then rerun `cdc-lake stack install`."
        )
    return files, mb


def install(settings: StackSettings, browser: bool = False) -> None:
    """What the stack runs; with ``browser``, Chromium too (``cdc-lake stack install``)."""
    t0 = time.monotonic()
    ensure_system_packages(browser)
    if jars_installed(settings):
        _say(f"jars already installed in {settings.jars_dir}; nothing to do")
    else:
        resolve_jars(settings)
    _say(f"done in {time.monotonic() - t0:.1f}s")
