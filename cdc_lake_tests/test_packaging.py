"""What the project's wheel holds (``[tool.setuptools.packages.find]`` in ``pyproject.toml``):
every package of ``cdc_lake`` but the test helpers, ``cdc_lake.testing``."""

from __future__ import annotations

import tomllib

from setuptools import find_packages

from cdc_lake.stack.settings import project_root


def test_the_wheel_leaves_the_test_helpers_out():
    config = tomllib.loads((project_root() / "pyproject.toml").read_text())
    find = config["tool"]["setuptools"]["packages"]["find"]
    shipped = set(find_packages(str(project_root()), include=find["include"],
                                exclude=find.get("exclude", ())))  # fmt: skip
    assert {"cdc_lake", "cdc_lake.lake", "cdc_lake.defs", "cdc_lake.spark_apps"} <= shipped
    assert not {p for p in shipped if p.startswith("cdc_lake.testing")}, shipped
    assert not {p for p in shipped if p.startswith(("cdc_lake_tests", "bench"))}, shipped
