"""Rows for PostgreSQL's COPY: a table to load (its name, columns, and rows), and rows as a
readable COPY text stream."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    rows: Callable[[], Iterable[tuple]]


def _copy_text(value: object) -> str:
    if value is None:
        return r"\N"
    text = str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


class RowStream(io.RawIOBase):
    """Rows as a readable COPY text stream, so millions of rows never sit in memory at once."""

    def __init__(self, rows: Iterable[tuple]):
        self._lines: Iterator[bytes] = (
            ("\t".join(_copy_text(v) for v in row) + "\n").encode() for row in rows
        )
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        while len(self._buf) < len(b):
            try:
                self._buf += next(self._lines)
            except StopIteration:
                break
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n
