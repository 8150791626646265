"""Custom plugins on MSK Connect: one deterministic ZIP per connector, uploaded and created once.

MSK Connect gives a connector exactly one plugin, and config providers must be on that plugin's
path, so each plugin is one ZIP holding the connector's jars and the msk-config-providers jars,
one top-level folder each. The ZIP is built deterministically (sorted entries, fixed
timestamps, stored) so the same jars give the same bytes.

Idempotent: the ZIP is uploaded to ``s3://<bucket>/<prefix>/<name>-<sha256[:12]>.zip`` only if
that key is absent (or holds an object of another size), and the plugin, named
``<name>-<sha256[:12]>``, is created only if no plugin has that name; a new plugin is awaited
until ACTIVE. Plugins cannot be changed in place: a changed jar set is a new plugin, which the
connector is then switched to. Old plugins are left for you to delete.

Failure behaviour: a missing folder or one without jars raises ``ValueError`` before any AWS
call; a plugin that fails to create raises ``MskConnectError`` with its state and the service's
description.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from cdc_lake.streaming.msk.api import Sleep, error_code, find_by_name, poll
from cdc_lake.streaming.msk.settings import MskConnectSettings

ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a ZIP entry can hold
CONFIG_PROVIDER_FOLDER = "msk-config-providers"


@dataclass(frozen=True)
class MskPluginDirs:
    """Folders of jars: each connector's, and the unpacked msk-config-providers release."""

    debezium: Path
    s3_sink: Path
    config_provider: Path


@dataclass(frozen=True)
class PluginArchive:
    name: str  # <base>-<sha256[:12]>: the custom plugin's name and the object's file name
    data: bytes
    sha256: str

    def key(self, prefix: str) -> str:
        prefix = prefix.strip("/")
        return f"{prefix}/{self.name}.zip" if prefix else f"{self.name}.zip"


def build_plugin_zip(folders: Mapping[str, Path]) -> bytes:
    """A ZIP with one top-level folder per entry of ``folders``, holding that folder's files.
    Entries are sorted, dated 1980-01-01 and stored (jars are compressed already), so the same
    files always give the same bytes."""
    entries: list[tuple[str, Path]] = []
    for top, folder in folders.items():
        folder = Path(folder)
        if not folder.is_dir():
            raise ValueError(f"plugin folder {folder} does not exist")
        files = [p for p in folder.rglob("*") if p.is_file()]
        if not any(p.suffix == ".jar" for p in files):
            raise ValueError(
                f"plugin folder {folder} holds no .jar files. Fix: run `cdc-lake stack install` "
                "for the connectors, or unpack the msk-config-providers release there."
            )
        entries += [(f"{top}/{p.relative_to(folder).as_posix()}", p) for p in files]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for arcname, path in sorted(entries):
            info = zipfile.ZipInfo(arcname, date_time=ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.create_system = 3  # unix, whatever the host
            zf.writestr(info, path.read_bytes())
    return buf.getvalue()


def plugin_archive(base_name: str, folders: Mapping[str, Path]) -> PluginArchive:
    data = build_plugin_zip(folders)
    digest = hashlib.sha256(data).hexdigest()
    return PluginArchive(name=f"{base_name}-{digest[:12]}", data=data, sha256=digest)


def plugin_archives(settings: MskConnectSettings, dirs: MskPluginDirs) -> dict[str, PluginArchive]:
    """The source's and the sink's plugin, each bundling the config provider. The source's also
    holds our connector jars: its transform chain starts with their ``TruncateMarker``, and a
    connector on MSK Connect loads classes from its one plugin only."""
    provider = {CONFIG_PROVIDER_FOLDER: dirs.config_provider}
    return {
        "source": plugin_archive(
            f"{settings.name_prefix}-debezium",
            {"debezium": dirs.debezium, "s3sink": dirs.s3_sink, **provider},
        ),
        "sink": plugin_archive(
            f"{settings.name_prefix}-s3-sink", {"s3sink": dirs.s3_sink, **provider}
        ),
    }


@dataclass
class PluginResult:
    name: str
    arn: str
    revision: int
    s3_uri: str
    sha256: str
    uploaded: bool
    created: bool

    def ref(self) -> dict[str, Any]:
        return {"customPlugin": {"customPluginArn": self.arn, "revision": self.revision}}


def upload_plugin(s3: Any, bucket: str, key: str, data: bytes) -> bool:
    """Put the ZIP unless an object of the same size is already there; True if uploaded."""
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
        if head.get("ContentLength") == len(data):
            return False
    except ClientError as e:
        if error_code(e) not in ("404", "NoSuchKey", "NotFound"):
            raise
    s3.put_object(Bucket=bucket, Key=key, Body=data, ContentType="application/zip")
    return True


def ensure_plugin(
    kafkaconnect: Any,
    s3: Any,
    settings: MskConnectSettings,
    archive: PluginArchive,
    timeout_s: float,
    poll_s: float,
    sleep: Sleep,
) -> PluginResult:
    key = archive.key(settings.plugin_prefix)
    uploaded = upload_plugin(s3, settings.plugin_bucket, key, archive.data)
    found = find_by_name(
        kafkaconnect,
        "list_custom_plugins",
        "customPlugins",
        "name",
        archive.name,
        namePrefix=archive.name,
    )
    created = found is None
    if found is None:
        found = kafkaconnect.create_custom_plugin(
            name=archive.name,
            contentType="ZIP",
            description=f"cdc-lake connector plugin, sha256 {archive.sha256}",
            location={
                "s3Location": {
                    "bucketArn": f"arn:{settings.partition}:s3:::{settings.plugin_bucket}",
                    "fileKey": key,
                }
            },
        )
    arn = found["customPluginArn"]
    state = found.get("customPluginState")
    revision = (found.get("latestRevision") or {}).get("revision") or found.get("revision")
    if state != "ACTIVE" or not revision:
        desc = poll(
            f"custom plugin {archive.name}",
            lambda: kafkaconnect.describe_custom_plugin(customPluginArn=arn),
            "customPluginState",
            {"ACTIVE"},
            {"CREATE_FAILED", "UPDATE_FAILED", "DELETING"},
            timeout_s,
            poll_s,
            sleep,
            hints={
                "CREATE_FAILED": f". Fix: check s3://{settings.plugin_bucket}/{key} is a ZIP "
                "of jars, delete the plugin and rerun"
            },
        )
        revision = desc["latestRevision"]["revision"]
    return PluginResult(
        name=archive.name,
        arn=arn,
        revision=int(revision),
        s3_uri=f"s3://{settings.plugin_bucket}/{key}",
        sha256=archive.sha256,
        uploaded=uploaded,
        created=created,
    )
