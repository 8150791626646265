"""Plugin archives: one deterministic ZIP per connector, a top-level folder per jar set."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from cdc_lake.streaming.msk.plugins import build_plugin_zip, plugin_archives
from cdc_lake.streaming.msk.settings import MskConnectSettings
from cdc_lake_tests.streaming.msk.helpers import make_plugin_dirs, write_jars


def test_plugin_zip_is_deterministic_and_laid_out_per_plugin(tmp_path: Path):
    jars = {"b.jar": b"bbb", "a.jar": b"aaa", "lib/c.jar": b"ccc"}
    one = write_jars(tmp_path / "one", jars)
    two = write_jars(tmp_path / "two", dict(reversed(list(jars.items()))))
    os.utime(two / "a.jar", (1_000_000_000, 1_000_000_000))  # other mtimes, same bytes
    provider = write_jars(tmp_path / "provider", {"p.jar": b"ppp"})
    first = build_plugin_zip({"debezium": one, "msk-config-providers": provider})
    assert build_plugin_zip({"debezium": two, "msk-config-providers": provider}) == first
    with zipfile.ZipFile(io.BytesIO(first)) as zf:
        assert zf.namelist() == [
            "debezium/a.jar",
            "debezium/b.jar",
            "debezium/lib/c.jar",
            "msk-config-providers/p.jar",
        ]
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert zf.read("debezium/lib/c.jar") == b"ccc"
    (two / "b.jar").write_bytes(b"changed")
    assert build_plugin_zip({"debezium": two, "msk-config-providers": provider}) != first
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no .jar files"):
        build_plugin_zip({"debezium": tmp_path / "empty"})


def test_the_source_plugin_holds_our_truncate_transform_beside_debezium(
    tmp_path: Path, msk: MskConnectSettings
):
    archives = plugin_archives(msk, make_plugin_dirs(tmp_path))
    with zipfile.ZipFile(io.BytesIO(archives["source"].data)) as zf:
        names = set(zf.namelist())
    # A connector on MSK Connect loads classes from its one plugin: the Debezium source's
    # transform chain starts with TruncateMarker, which our sink's jar holds.
    assert {"debezium/debezium-connector-postgres.jar", "s3sink/cdc-lake-s3-sink.jar"} <= names
