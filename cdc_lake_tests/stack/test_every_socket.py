"""Every socket the stack listens on, found from the system, refuses another local user.

The sockets are read off the kernel (``/proc/<pid>/fd`` joined with ``/proc/net/{tcp,tcp6,unix}``)
for every process of every service and their children, never from a list of ports. Each one is
then tried as a second Unix user with the probes of its service's protocol; a socket passes
when a probe sees the protocol refuse an unauthenticated client. One that no probe recognises
fails the test, so a port a change opens is classified before it lands.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg2

from cdc_lake.stack import LocalStack
from cdc_lake_tests.second_user import (
    as_user,
    attacker,
    descendants,
    kafka_login,
    kafka_metadata,
    listening_sockets,
    open_blocks,
    py4j_command,
    spark_rpc,
    unix_listeners,
)

# The probes of each (service, program): tried in order, the first that recognises a socket
# decides.
Probes = dict[tuple[str, str], tuple[Callable[[int], str], ...]]
REFUSED = frozenset({400, 401, 403})  # 400: Connect's internal endpoint without its signature


def _http(*requests: tuple[str, str] | tuple[str, str, frozenset[int]]) -> Callable[[int], str]:
    """Anonymous requests (method, path[, the codes that count as refused]): "refused" when
    each got a refusal (401, 403 or 400 by default), else what was served."""

    def probe(port: int) -> str:
        answers = []
        for method, path, *codes in requests:
            body = b"[]" if method == "POST" else None
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", body, method=method)
            req.add_header("Content-Type", "application/json")
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    answers.append(f"{method} {path}: {r.status}")
            except urllib.error.HTTPError as e:
                if e.code not in (codes[0] if codes else REFUSED):
                    answers.append(f"{method} {path}: {e.code}")
            except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
                return f"not http: {e!r}"[:200]
        return "refused" if not answers else "served: " + "; ".join(answers)

    return probe


def _postgres(port: int) -> str:
    for user in ("cdc_lake", "cdc_replicator", "postgres"):
        try:
            psycopg2.connect(
                host="127.0.0.1", port=port, user=user, password="guessed", dbname="cdc_lake",
                connect_timeout=5,
            ).close()  # fmt: skip
            return f"served: logged in as {user}"
        except psycopg2.OperationalError as e:
            if "password authentication failed" not in str(e) and "no pg_hba" not in str(e):
                return f"not postgres: {e}"
    return "refused"


def _kafka(port: int) -> str:
    answers = (kafka_metadata(port), kafka_login(port, "broker", "guessed"))
    return "refused" if answers == ("closed", "refused: 58") else f"served: {answers}"


def _spark(port: int) -> str:
    rpc = spark_rpc(port, open_blocks(["broadcast_0_piece0"]))
    if rpc.startswith("failure: java.lang.IllegalStateException: Expected SaslMessage"):
        return "refused"
    return f"served: {rpc}" if rpc == "response" else f"not spark: {rpc}"


def _py4j(port: int) -> str:
    answer = py4j_command(port)
    return "refused" if answer.startswith("!xsAuthentication error") else f"not py4j: {answer}"


def _accumulator(port: int) -> str:
    """PySpark's accumulator server reads its token first and hangs up on a wrong one, before
    it reads any update."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"g" * 512)
        try:
            got = sock.recv(100)
        except TimeoutError:
            return "not the accumulator server: timeout"
    return "refused" if got == b"" else f"served: {got!r}"


def spark_cluster_probes(services: list[str]) -> Probes:
    """The standalone cluster's daemons: Spark's RPC, or a web UI behind the token filter, whose
    pages, JSON, executor logs and kill links must all answer 401. (A worker's executors, alive
    only while an app runs, are not among them when no app runs.)"""
    ui = _http(
        ("GET", "/"), ("GET", "/json/"), ("GET", "/api/v1/applications"),
        ("GET", "/logPage/?appId=app&executorId=0&logType=stderr"),
        ("POST", "/app/kill/?id=app&terminate=true"),
    )  # fmt: skip
    return {(name, "java"): (_spark, ui) for name in services}


def probes(raw_bucket: str, key: str) -> Probes:
    """The protocols each service's processes speak, by service and program (a process's
    comm), tried in this order; the first that recognises the socket decides. The lake server
    is Python (its HTTP API, PySpark's accumulator server) and a JVM (Spark's ports, py4j's).
    ``key`` is an object of ``raw_bucket`` that exists."""
    s3 = _http(
        ("GET", "/"), ("GET", f"/{raw_bucket}/"), ("GET", f"/{raw_bucket}/{key}"),
        ("PUT", f"/{raw_bucket}/forged"), ("DELETE", f"/{raw_bucket}/{key}"),
        ("PUT", "/forged-bucket"),
        # S3Proxy answers an anonymous read of a missing key 404 NoSuchKey: it tells that a
        # name is not there, never what is (docs/security.md).
        ("GET", f"/{raw_bucket}/no-such-key", REFUSED | {404}),
    )  # fmt: skip
    connect = _http(
        ("GET", "/"), ("GET", "/connectors"), ("POST", "/connectors"),
        ("POST", "/connectors/probe/tasks"),  # the internal route: its session-key signature
    )  # fmt: skip
    lake_server = _http(("GET", "/"), ("GET", "/memory"), ("POST", "/"))
    return {
        ("postgres", "postgres"): (_postgres,),
        ("s3", "java"): (s3,),
        ("kafka", "java"): (_kafka,),
        ("connect", "java"): (connect,),
        ("lake_server", "python"): (lake_server, _accumulator),
        ("lake_server", "java"): (_spark, _py4j),
    }


def probe_every_socket(stack: LocalStack, table: Probes) -> dict[str, list[str]]:
    """Every listening socket of the stack's processes and their children, found from the
    system and tried as a second Unix user with its service's probes (``table``): where -> the
    answers. Fails on a socket off loopback, or of a program ``table`` does not classify."""
    tcp: list[tuple[str, str, int, str]] = []
    unix: set[str] = set()
    for name, st in stack.status().items():
        assert st.pid is not None, name
        for pid in [st.pid, *descendants(st.pid)]:
            try:
                program = Path(f"/proc/{pid}/comm").read_text().strip()
                program = "python" if program.startswith("python") else program
                tcp += [(name, program, port, addr) for addr, port in listening_sockets(pid)]
                unix |= unix_listeners(pid)
            except FileNotFoundError:  # a short-lived child (a PostgreSQL backend) has ended
                continue
    tcp = sorted(set(tcp))
    # Every TCP socket is on loopback.
    assert all(addr in ("127.0.0.1", "::ffff:127.0.0.1") for *_, addr in tcp), tcp
    # A socket of a program nobody has classified fails here: add its protocol to the table.
    assert {(n, p) for n, p, *_ in tcp} <= set(table), tcp

    def probe() -> dict:
        seen: dict = {}
        for name, program, port, _ in tcp:
            answers = []
            for check in table[name, program]:
                answers.append(check(port))
                if not answers[-1].startswith("not "):
                    break
            seen[f"{name} ({program}):{port}"] = answers
        for path in sorted(unix):
            with socket.socket(socket.AF_UNIX) as sock:
                try:
                    sock.connect(path)
                    seen[path] = ["served: connected"]
                except PermissionError:
                    seen[path] = ["refused"]
                except OSError as e:
                    seen[path] = [f"not reachable: {e}"]
        return seen

    seen = as_user(attacker(), probe)
    assert "child_error" not in seen, seen
    unrefused = {where: a for where, a in seen.items() if a[-1] != "refused"}
    assert unrefused == {}, json.dumps(seen, indent=1)
    # Every service's own port is among them: the sockets came from the system, not a list.
    ports = {int(w.rsplit(":", 1)[1]) for w in seen if not w.startswith("/")}
    assert {stack.settings.port(p) for svc in stack.services for p in svc.ports} <= ports, seen
    return seen


def test_every_socket_of_the_stack_refuses_another_local_user(local_stack: LocalStack):
    s = local_stack.settings
    key = f"probes/{uuid.uuid4().hex}.jsonl"
    s3 = local_stack.service("s3").client()  # type: ignore[attr-defined]
    s3.put_object(Bucket=s.raw_bucket, Key=key, Body=b"{}\n")
    probe_every_socket(local_stack, probes(s.raw_bucket, key))
    # The object is still there, as it was: the anonymous DELETE and PUT changed nothing.
    assert s3.get_object(Bucket=s.raw_bucket, Key=key)["Body"].read() == b"{}\n"
    assert s3.list_objects_v2(Bucket=s.raw_bucket, Prefix="forged")["KeyCount"] == 0
    s3.delete_object(Bucket=s.raw_bucket, Key=key)
