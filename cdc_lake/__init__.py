"""cdc-lake: PostgreSQL changes to an Apache Hudi lake through Debezium and Kafka, on Dagster."""

from pathlib import Path


def sql_dir() -> Path:
    """``sql/`` of the checkout this package runs from; for an installed package (the SQL is not
    package data), of the working directory. Here, at the root, because the source's setup and
    the captured tables' declared columns (``cdc_lake/lake/tables.py``, shipped to EMR) both
    read it."""
    checkout = Path(__file__).resolve().parents[1] / "sql"
    return checkout if checkout.is_dir() else Path.cwd() / "sql"
