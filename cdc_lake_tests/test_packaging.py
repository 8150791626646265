"""What the project's wheel holds: the ``cdc_lake`` package with its data files, and nothing of
the tests or the benchmarks (and their helpers). Built for real from a copy of the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from cdc_lake.stack.settings import project_root


def test_the_wheel_holds_the_package_and_no_test_or_bench_code(tmp_path: Path):
    root, src = project_root(), tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", ".venv", ".cdc-lake")
    for name in ("cdc_lake", "cdc_lake_tests", "bench"):
        shutil.copytree(root / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "setup.cfg", "README.md"):
        shutil.copy(root / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path / "dist"), str(src)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("cdc_lake-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"cdc_lake"}, tops
    for needed in ("cdc_lake/definitions.py", "cdc_lake/defs/lake/assets.py",
                   "cdc_lake/spark_apps/params.py", "cdc_lake/stack/services/postgres.py"):
        assert needed in names, needed  # fmt: skip
    assert [n for n in names if n.startswith("cdc_lake/stack/maven/") and n.endswith(".xml")]
    assert not [n for n in names if "/testing/" in n or "conftest" in n or "/test_" in n]
