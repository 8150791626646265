"""Another local user, for the tests that play one: a second Unix user (``useradd``) in a forked
child, and the clients it tries the stack's sockets with."""

from __future__ import annotations

import json
import os
import pwd
import socket
import struct
import subprocess
from collections.abc import Callable

ATTACKER = "cdclake-attacker"


def as_user(user: str, probe: Callable[[], dict]) -> dict:
    """``probe()`` in a forked child that has dropped to ``user``; its JSON answer."""
    entry = pwd.getpwnam(user)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            answer = json.dumps(probe()).encode()
            os.write(write, answer)
        except BaseException as e:  # noqa: BLE001
            os.write(write, json.dumps({"child_error": repr(e)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks))


def attacker() -> str:
    assert os.geteuid() == 0, "the attacker test makes a second user: run the suite as root"
    try:
        pwd.getpwnam(ATTACKER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", ATTACKER],
            check=True,
        )
    return ATTACKER


# Spark's transport (network-common): a frame is its length (8 bytes, counting itself), a type
# byte and the message. An RpcRequest (3) is a request id and a body; the block manager reads
# an OpenBlocks body (type 0: app id, executor id, block ids) as a fetch of those blocks, which
# it answers with an RpcResponse (4) holding a stream handle. A StreamRequest (6) asks for a
# file the driver serves (a jar) by its stream id.


def _text(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">i", len(raw)) + raw


def open_blocks(block_ids: list[str]) -> bytes:
    ids = b"".join(_text(b) for b in block_ids)
    return b"\x00" + _text("app") + _text("driver") + struct.pack(">i", len(block_ids)) + ids


def _frame(message: bytes) -> bytes:
    return struct.pack(">q", 8 + len(message)) + message


def _answer(sock: socket.socket) -> bytes | None:
    data = b""
    while len(data) < 8 or len(data) < struct.unpack(">q", data[:8])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data[8:]


def _exchange(port: int, message: bytes, timeout_s: float) -> bytes | str:
    """One frame sent to a Spark transport port: the answer's message, or "closed" or
    "timeout"."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(_frame(message))
        try:
            got = _answer(s)  # a StreamResponse's frame is its header; the file follows it
        except TimeoutError:
            return "timeout"
        except OSError:
            return "closed"
    return "closed" if got is None else got


def spark_rpc(port: int, body: bytes, timeout_s: float = 5.0) -> str:
    """What a Spark transport port answers an unauthenticated RpcRequest: "response" (served),
    "failure: <the server's error>", "closed" or "timeout"."""
    message = b"\x03" + struct.pack(">q", 1) + struct.pack(">i", len(body)) + body
    got = _exchange(port, message, timeout_s)
    if isinstance(got, str):
        return got
    if got[0] == 4:
        return "response"
    if got[0] == 5:
        (n,) = struct.unpack(">i", got[9:13])
        return "failure: " + got[13 : 13 + n].decode(errors="replace").splitlines()[0]
    return f"type {got[0]}"


def spark_stream(port: int, stream_id: str, timeout_s: float = 5.0) -> str:
    """What a Spark transport port answers an unauthenticated StreamRequest: "stream" (served),
    "stream failure", "closed" or "timeout"."""
    got = _exchange(port, b"\x06" + _text(stream_id), timeout_s)
    if isinstance(got, str):
        return got
    return {7: "stream", 8: "stream failure"}.get(got[0], f"type {got[0]}")
