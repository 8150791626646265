"""The EMR package of the Spark apps: what the zip holds, and that it is deterministic."""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path

import cdc_lake
from cdc_lake.spark_apps.package import PACKAGES, build_package


def _names(archive: Path) -> list[str]:
    with zipfile.ZipFile(archive) as zf:
        return zf.namelist()


def test_the_zip_holds_the_apps_and_what_they_import_and_nothing_test_only(tmp_path: Path):
    package = build_package(tmp_path / "a")
    names = _names(package.archive)
    entry = Path(cdc_lake.__file__).parent / "spark_apps" / "entry.py"
    assert package.entry_point.read_bytes() == entry.read_bytes()
    for name in (
        "cdc_lake/__init__.py",
        "cdc_lake/spark_apps/run.py",
        "cdc_lake/spark_apps/upsert.py",
        "cdc_lake/marts/order_items.py",
        "cdc_lake/lake/ingest.py",
        "dagster_pipes/__init__.py",
    ):
        assert name in names
    # Test-only helpers and Dagster-side code never ship to EMR.
    shipped = {n.split("/")[1] for n in names if n.startswith("cdc_lake/") and n.count("/") > 1}
    assert shipped == {p.removeprefix("cdc_lake/") for p in PACKAGES} | {"source", "aws"}
    # Of the source package, only the captured tables' declarations (no psycopg2 on EMR), and of
    # the AWS one only Glue's sync options (the EMR step client is Dagster's side).
    assert sorted(n for n in names if n.startswith("cdc_lake/source/")) == [
        "cdc_lake/source/__init__.py",
        "cdc_lake/source/captured.py",
    ]
    assert sorted(n for n in names if n.startswith("cdc_lake/aws/")) == [
        "cdc_lake/aws/__init__.py",
        "cdc_lake/aws/glue.py",
    ]

    # Every cdc_lake module a shipped module imports is shipped too.
    with zipfile.ZipFile(package.archive) as zf:
        for name in names:
            if not name.startswith("cdc_lake/"):
                continue
            for node in ast.walk(ast.parse(zf.read(name))):
                module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
                if module.startswith("cdc_lake."):
                    module = module.replace(".", "/")
                    assert f"{module}.py" in names or f"{module}/__init__.py" in names, name

    again = build_package(tmp_path / "b")
    assert again.digest == package.digest
    assert again.archive.read_bytes() == package.archive.read_bytes()
