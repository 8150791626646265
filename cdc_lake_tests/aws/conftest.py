"""moto's server for the AWS control planes that cannot run here (EMR, EMR Serverless, Glue).

S3 stays the real local S3 server of the session stack: the job's code, its Pipes messages and
the lake all live there, as they would live in one AWS account's S3.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from moto.server import ThreadedMotoServer

REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()
