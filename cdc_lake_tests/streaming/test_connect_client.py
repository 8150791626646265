"""The Connect REST client's reads over a real HTTP server that answers as a busy worker does
(``cdc_lake/streaming/connect_client.py``): a "not now" is asked again, anything else raises
with the worker's message."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cdc_lake.streaming.connect_client import ConnectClient, ConnectError


@pytest.fixture
def worker() -> Iterator[tuple[str, list[tuple[int, dict]]]]:
    """A server that answers each GET with the next of ``answers`` (the last one repeats)."""
    answers: list[tuple[int, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            status, body = answers.pop(0) if len(answers) > 1 else answers[0]
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", answers
    server.shutdown()
    server.server_close()


def test_a_read_asks_again_while_the_worker_says_not_now(worker):
    url, answers = worker
    answers += [
        (409, {"message": "Cannot complete request momentarily due to stale config"}),
        (500, {"message": "Request timed out"}),
        (200, {"name": "sink", "a": "1"}),
    ]
    assert ConnectClient(url, transient_wait_s=10).config("sink") == {"name": "sink", "a": "1"}
    assert answers == [(200, {"name": "sink", "a": "1"})]  # both "not now" answers were read


def test_a_read_that_stays_busy_or_fails_raises_with_the_workers_message(worker):
    url, answers = worker
    answers.append((500, {"message": "Request timed out"}))
    with pytest.raises(ConnectError, match=r"reading sink's config failed \(500\): Request timed"):
        ConnectClient(url, transient_wait_s=1.5).config("sink")
    answers[:] = [(400, {"message": "bad"})]
    with pytest.raises(ConnectError, match=r"reading sink's status failed \(400\): bad"):
        ConnectClient(url, transient_wait_s=30).status("sink")
    answers[:] = [(404, {"message": "no such connector"})]
    assert ConnectClient(url).status("sink") is None
