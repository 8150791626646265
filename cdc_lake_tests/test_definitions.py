"""The definitions load in-process without touching any service."""

from __future__ import annotations

import socket

import dagster as dg
import pytest


def test_definitions_load_without_connecting(monkeypatch: pytest.MonkeyPatch):
    def no_network(*args, **kwargs):
        raise AssertionError("loading the definitions opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    from cdc_lake.definitions import defs

    loaded = defs() if not isinstance(defs, dg.Definitions) else defs
    assert isinstance(loaded, dg.Definitions)
    loaded.get_repository_def().load_all_definitions()
