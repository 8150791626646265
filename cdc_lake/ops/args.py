"""What the ``cdc-lake`` commands share: the local stack's settings (``--state-dir``), a
connection to its PostgreSQL, the ``--table`` option, and argparse types that fail with a clear
message rather than a traceback."""

from __future__ import annotations

import argparse
from typing import Any

from cdc_lake.source.captured import TABLES
from cdc_lake.stack import StackSettings


def stack_settings(args: argparse.Namespace) -> StackSettings:
    return StackSettings.from_env(state_dir=args.state_dir)


def connect(settings: StackSettings) -> Any:
    import psycopg2

    return psycopg2.connect(settings.pg_dsn())


def add_table_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--table``: one of the declared captured tables. Its default is the first declared one
    (the order of ``TABLES``), so the commands the docs show without it keep their meaning."""
    parser.add_argument(
        "--table",
        choices=[t.source for t in TABLES],
        default=TABLES[0].source,
        help=f"{what} (default: {TABLES[0].source}, the first declared)",
    )


def number(kind: type, low: float, high: float | None = None, what: str = "") -> Any:
    """An argparse type: a ``kind`` (int or float) from ``low`` to ``high``, else a clear error."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from e
        if value < low or (high is not None and value > high) or value != value:  # NaN too
            bound = f"from {low:g} to {high:g}" if high is not None else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: {what} must be {bound}")
        return value

    return parse
