"""Package the lake's Spark apps for EMR: the entry point and one ``--py-files`` zip.

The zip holds the modules the apps import (``cdc_lake.spark_apps``, ``cdc_lake.lake``,
``cdc_lake.marts``, ``cdc_lake.raw``, of ``cdc_lake.source`` only the captured tables'
declarations, and of ``cdc_lake.aws`` only Glue's sync options) and their pure-Python
dependency ``dagster_pipes``, copied from this environment so the remote side speaks the same
Pipes version as the Dagster process. PySpark, Hudi and boto3 come from the EMR image; no jar is
shipped.

The zip is deterministic (sorted entries, fixed timestamps), and the upload key carries its
content hash: an unchanged package is uploaded once, and a changed one never overwrites the code
of a run in flight. The file names (``entry.py``, ``cdc_lake_job.zip``) are kept as deployed.
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster_pipes

import cdc_lake

PACKAGES = ("cdc_lake/spark_apps", "cdc_lake/lake", "cdc_lake/marts", "cdc_lake/raw")
# Single modules of packages the apps need no more of (the source's need psycopg2, the EMR
# step client Dagster's side).
MODULES = (
    "cdc_lake/__init__.py",
    "cdc_lake/source/__init__.py",
    "cdc_lake/source/captured.py",
    "cdc_lake/aws/__init__.py",
    "cdc_lake/aws/glue.py",
)
FIXED_TIME = (2020, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class AppPackage:
    entry_point: Path
    archive: Path
    digest: str  # sha256 of entry point and archive, first 16 hex digits

    def keys(self, prefix: str) -> tuple[str, str]:
        base = f"{prefix.strip('/')}/{self.digest}"
        return f"{base}/entry.py", f"{base}/cdc_lake_job.zip"


def _files() -> list[tuple[str, Path]]:
    root = Path(cdc_lake.__file__).parent.parent
    out = [(name, root / name) for name in MODULES]
    for pkg in PACKAGES:
        out += [(str(p.relative_to(root)), p) for p in (root / pkg).rglob("*.py")]
    pipes_root = Path(dagster_pipes.__file__).parent
    out += [(f"dagster_pipes/{p.relative_to(pipes_root)}", p) for p in pipes_root.rglob("*.py")]
    return sorted(out)


def build_package(out_dir: Path) -> AppPackage:
    out_dir.mkdir(parents=True, exist_ok=True)
    archive = out_dir / "cdc_lake_job.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, path in _files():
            info = zipfile.ZipInfo(name, FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, path.read_bytes())
    entry = out_dir / "entry.py"
    entry.write_bytes((Path(cdc_lake.__file__).parent / "spark_apps" / "entry.py").read_bytes())
    digest = hashlib.sha256(entry.read_bytes() + archive.read_bytes()).hexdigest()[:16]
    return AppPackage(entry, archive, digest)


def upload_package(
    s3_client: Any, package: AppPackage, bucket: str, prefix: str
) -> tuple[str, str]:
    """Upload what is missing; return the s3:// URIs of the entry point and the zip."""
    uris = []
    for key, path in zip(package.keys(prefix), (package.entry_point, package.archive), strict=True):
        try:
            s3_client.head_object(Bucket=bucket, Key=key)
        except s3_client.exceptions.ClientError as e:
            if e.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                raise
            s3_client.upload_file(str(path), bucket, key)
        uris.append(f"s3://{bucket}/{key}")
    return uris[0], uris[1]
