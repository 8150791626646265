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
from pathlib import Path

ATTACKER = "cdclake-attacker"


def _address(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    # /proc/net/tcp6: four 32-bit words, each in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``: children, their children, and so on."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for proc in Path("/proc").iterdir():
            try:
                if (
                    proc.name.isdigit()
                    and int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent
                ):
                    out.append(int(proc.name))
                    todo.append(int(proc.name))
            except (OSError, IndexError, ValueError):
                continue
    return out


def unix_listeners(pid: int) -> set[str]:
    """The paths of the Unix sockets the process listens on (not abstract ones)."""
    inodes = _socket_inodes(pid)
    paths = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        f = line.split()
        # Flags 00010000: __SO_ACCEPTCON, a listening socket.
        if len(f) >= 8 and f[6] in inodes and f[3] == "00010000" and f[7].startswith("/"):
            paths.add(f[7])
    return paths


def listening_sockets(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket the process listens on, from its fds and the
    kernel's socket tables."""
    inodes = _socket_inodes(pid)
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                addr, port = local.split(":")
                found.append((_address(addr), int(port, 16)))
    return found


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


# Kafka's protocol: a request is its size (4 bytes), the API key and version (2 bytes each), a
# correlation id (4), the client id (a 2-byte length and its bytes), then the body; a response
# is its size, the correlation id, then the body.
_METADATA, _SASL_HANDSHAKE, _SASL_AUTHENTICATE = 3, 17, 36


def _kafka_request(api: int, version: int, body: bytes) -> bytes:
    client = b"cdclake-attacker"
    header = struct.pack(">hhih", api, version, 7, len(client)) + client
    return struct.pack(">i", len(header) + len(body)) + header + body


def _kafka_response(sock: socket.socket) -> bytes | None:
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        try:
            chunk = sock.recv(65536)
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data[8:]  # past the size and the correlation id


def kafka_metadata(port: int, timeout_s: float = 5.0) -> str:
    """What a Kafka listener answers a Metadata request (every topic) from a client that did
    not authenticate: "served: <topic count> topics" or "closed"."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(_kafka_request(_METADATA, 0, struct.pack(">i", 0)))
        got = _kafka_response(s)
    if got is None:
        return "closed"
    (brokers,) = struct.unpack(">i", got[:4])
    at = 4
    for _ in range(brokers):  # node id, host, port
        (n,) = struct.unpack(">h", got[at + 4 : at + 6])
        at += 6 + n + 4
    (topics,) = struct.unpack(">i", got[at : at + 4])
    return f"served: {topics} topics"


def kafka_login(port: int, user: str, password: str, timeout_s: float = 5.0) -> str:
    """SASL/PLAIN on a Kafka listener: "authenticated", "refused: <error code>" (58: the
    user or password is wrong), "no PLAIN" or "closed"."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        mechanism = b"PLAIN"
        s.sendall(_kafka_request(_SASL_HANDSHAKE, 1, struct.pack(">h", 5) + mechanism))
        got = _kafka_response(s)
        if got is None:
            return "closed"
        if struct.unpack(">h", got[:2])[0] != 0:
            return "no PLAIN"
        token = b"\0" + user.encode() + b"\0" + password.encode()
        s.sendall(_kafka_request(_SASL_AUTHENTICATE, 0, struct.pack(">i", len(token)) + token))
        got = _kafka_response(s)
    if got is None:
        return "closed"
    (error,) = struct.unpack(">h", got[:2])
    return "authenticated" if error == 0 else f"refused: {error}"


def py4j_command(port: int) -> str:
    """py4j's answer to a command sent without its token."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"c\nt\ngetCallbackClient\ne\n")
        try:
            return sock.recv(200).decode(errors="replace").strip()
        except TimeoutError:
            return "timeout"
