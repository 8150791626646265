"""The lake server: one long-lived process of the local stack that holds a warm Spark session and
runs the lake's Spark apps (``cdc_lake.spark_apps.run.run_app``) on it for Dagster's runs.

A run process that builds its own session pays the JVM's start and Hudi's class loading on every
run; the server pays them once, at ``cdc-lake stack up``. It cannot be Spark Connect: the apps
reach Hudi's meta client and s3a's keys over py4j (``spark.sparkContext._jvm``).

Protocol: HTTP with JSON bodies on ``127.0.0.1`` only, the port ``lake_server`` of the stack.
Every request carries ``Authorization: Bearer <token>``; the token is in ``<state>/conf/``
(``token_path``, a 0600 file written by ``stack up``), never in an argument or the environment.
A request without it gets 401 and nothing else.

- ``GET /health``: ``{"pid", "jvm_pid", "runs", "warm_up"}`` once the session is up and while
  its JVM answers over py4j; 503 once it does not (``stack down`` and ``up`` start a new one).
- ``GET /memory``: a full GC under the app lock (so never during an app), then the JVM's heap in
  use, committed and its maximum in MiB, and the JVM's and the server's live threads: what
  ``python -m bench --only soak`` samples to see whether the server grows with the runs.
- ``POST /run`` with ``{"app", "params"}`` (the JSON the Pipes path sends as extras): the app's
  ``AppReport`` as ``{"ok": true, "report": {"metadata", "checks"}, "seconds"}``. An app that
  raises gives ``{"ok": false, "error", "traceback", "seconds"}``; the session stays up for the
  next request.

Ordering: one app at a time (a lock: Hudi takes one writer per table); a request that arrives
while another runs waits for it. A client that gives up does not stop its app. Right after the
session is up, a warm-up runs the upsert app on a throwaway table of its own (in the stack's
S3, in buckets of its own, never the lake's), each round under the same lock, until the
JIT is quiet or an app is asked for, so a user's first apps cost what later ones do
(``cdc_lake/stack/warm_up.py``); ``/health`` then gives its rounds and seconds as ``warm_up``.

Secrets: the server reads the stack's S3 keys from the state directory's credentials itself and
hands them to the JVM it starts through a 0600 profile file that the JVM's environment names
(``build_spark_session``: not through the Hadoop configuration, which Spark broadcasts) and to
its boto3 client in memory; its argv holds the state directory only, no environment a secret.
Its log (``logs/lake_server.log``) gets one line per request (app, outcome, seconds) and
Spark's warnings; never parameters or reports. After each app the session's cached tables are
dropped, so memory does not grow with the runs it served.
"""

from __future__ import annotations

import argparse
import hmac
import http.client
import json
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cdc_lake.stack.process import private_token
from cdc_lake.stack.settings import StackSettings

SERVICE = "lake_server"


def token_path(settings: StackSettings) -> Path:
    return settings.conf_dir / f"{SERVICE}.token"


def ensure_token(settings: StackSettings) -> None:
    """A random token in a 0600 file, made once; the server and its clients read it."""
    private_token(token_path(settings), nbytes=24)


class LakeServerError(RuntimeError):
    """The lake server could not be reached or refused the request (not an app's failure)."""


def request(
    host: str,
    port: int,
    token_file: str | Path,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """One authenticated request; the answer's JSON. ``LakeServerError`` when the server is not
    there, has no token file, or answers other than 200."""
    try:
        token = Path(token_file).read_text().strip()
    except FileNotFoundError as e:
        raise LakeServerError(f"no lake server token at {token_file}") from e
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request(
            method,
            path,
            body=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        answer = conn.getresponse()
        data = answer.read()
    except OSError as e:
        raise LakeServerError(f"no lake server answers on {host}:{port} ({e})") from e
    finally:
        conn.close()
    if answer.status != 200:
        raise LakeServerError(f"the lake server on {host}:{port} answered {answer.status}")
    return json.loads(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], token: str, spark: Any, s3: Any):
        super().__init__(address, _Handler)
        self.token, self.spark, self.s3 = token, spark, s3
        self.lock = threading.Lock()
        self.runs = 0
        self.asked = 0  # apps asked for, from the start: the warm-up gives way to the first
        self.warm_up: dict[str, Any] | None = None  # how the warm-up went, once it is over
        self.jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())

    def memory(self) -> dict[str, Any]:
        jvm = self.spark.sparkContext._jvm
        factory = jvm.java.lang.management.ManagementFactory
        with self.lock:
            jvm.java.lang.System.gc()
            heap = factory.getMemoryMXBean().getHeapMemoryUsage()
            mib = 1024 * 1024
            return {
                "heap_used_mb": round(heap.getUsed() / mib, 1),
                "heap_committed_mb": round(heap.getCommitted() / mib, 1),
                "heap_max_mb": round(heap.getMax() / mib, 1),
                "jvm_threads": int(factory.getThreadMXBean().getThreadCount()),
                "python_threads": threading.active_count(),
                "runs": self.runs,
            }

    def run_app(self, app: str, params: dict[str, Any]) -> dict[str, Any]:
        from cdc_lake.spark_apps.run import run_app

        self.asked += 1
        with self.lock:
            t0 = time.monotonic()
            try:
                report = run_app(self.spark, self.s3, app, params)
                answer: dict[str, Any] = {
                    "ok": True,
                    "report": {"metadata": report.metadata, "checks": report.checks},
                }
            except Exception as e:
                answer = {
                    "ok": False,
                    "error": f"{type(e).__name__}: {e}",
                    "traceback": traceback.format_exc(),
                }
            finally:
                self.spark.catalog.clearCache()
                self.runs += 1
            answer["seconds"] = round(time.monotonic() - t0, 3)
        outcome = "ok" if answer["ok"] else "FAILED: " + answer["error"].splitlines()[0][:300]
        _say(f"{app} {outcome} in {answer['seconds']:.1f}s")
        return answer


class _Handler(BaseHTTPRequestHandler):
    @property
    def lake(self) -> _Server:
        assert isinstance(self.server, _Server)
        return self.server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per app is logged by the server; no access log

    def _reply(self, status: int, body: dict[str, Any] | None = None) -> None:
        data = json.dumps(body or {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        given = self.headers.get("Authorization", "")
        expected = f"Bearer {self.lake.token}"
        if hmac.compare_digest(given.encode(), expected.encode()):
            return True
        self._reply(401)
        return False

    def do_GET(self) -> None:
        if not self._authorized():
            return
        s = self.lake
        if self.path == "/memory":
            try:
                return self._reply(200, s.memory())
            except Exception:  # the JVM no longer answers, as /health says with 503
                return self._reply(503)
        if self.path != "/health":
            return self._reply(404)
        try:
            s.spark.sparkContext._jvm.java.lang.System.nanoTime()  # the JVM still answers
        except Exception:
            return self._reply(503)
        self._reply(
            200, {"pid": os.getpid(), "jvm_pid": s.jvm_pid, "runs": s.runs, "warm_up": s.warm_up}
        )

    def do_POST(self) -> None:
        if not self._authorized():
            return
        if self.path != "/run":
            return self._reply(404)
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            app, params = body["app"], body["params"]
        except (ValueError, KeyError, TypeError):
            return self._reply(400)
        self._reply(200, self.lake.run_app(app, params))


def _say(msg: str) -> None:
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] lake_server: {msg}", flush=True)


def _s3_client(settings: StackSettings) -> Any:
    import boto3
    from botocore.config import Config

    c = settings.credentials
    return boto3.client(
        "s3",
        endpoint_url=settings.s3_endpoint,
        aws_access_key_id=c.s3_access_key,
        aws_secret_access_key=c.s3_secret_key,
        region_name=settings.region,
        config=Config(s3={"addressing_style": "path"}),
    )


def warm_up(server: _Server, settings: StackSettings) -> None:
    """The upsert app on a throwaway table until the JIT is quiet (``cdc_lake/stack/warm_up.py``),
    each round under the app lock, none once an app was asked for; a failure is logged and
    changes nothing else."""
    from cdc_lake.spark_apps.run import run_app
    from cdc_lake.stack import warm_up as W

    def app(name: str, params: dict[str, Any]) -> Any:
        with server.lock:
            if server.asked:  # an app asked for while this round waited for the lock
                return None
            try:
                return run_app(server.spark, server.s3, name, params)
            finally:
                server.spark.catalog.clearCache()

    # Where the warm-up of earlier versions wrote its table (two local writes).
    shutil.rmtree(settings.data_dir(SERVICE) / "warm-up", ignore_errors=True)
    t0 = time.monotonic()
    try:
        raw, lake = settings.warm_up_buckets  # its own: never the lake's
        rounds = W.run(server.spark, server.s3, raw, lake, app, _say, lambda: server.asked > 0)
        jit = sum(r["jit_s"] for r in rounds)
        server.warm_up = {"rounds": len(rounds), "seconds": round(time.monotonic() - t0, 1)}
        _say(f"warmed up in {time.monotonic() - t0:.1f}s ({len(rounds)} rounds, {jit:.1f}s of "
             f"JIT){'; an app was asked for' if server.asked else ''}")  # fmt: skip
    except Exception as e:
        server.warm_up = {"error": f"{type(e).__name__}: {e}"[:300]}
        _say(f"warm-up failed (the apps will load Hudi themselves): {type(e).__name__}: {e}")


def serve(settings: StackSettings) -> None:
    """Build the session, then serve until SIGTERM or SIGINT; the session stops on the way out."""
    from cdc_lake.stack.spark import build_spark_session

    token = token_path(settings).read_text().strip()
    t0 = time.monotonic()
    spark = build_spark_session(settings, app_name="cdc-lake-lake-server")
    server = _Server((settings.host, settings.port(SERVICE)), token, spark, _s3_client(settings))
    _say(f"Spark up in {time.monotonic() - t0:.1f}s (JVM pid {server.jvm_pid}); serving")
    threading.Thread(target=warm_up, args=(server, settings), daemon=True).start()

    def stop(signum: int, _frame: Any) -> None:
        # shutdown() waits for serve_forever, which runs in this (the main) thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        spark.stop()
        _say("stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cdc_lake.stack.lake_server")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--port-base", type=int, required=True)
    parser.add_argument("--jars-dir", required=True)
    args = parser.parse_args(argv)
    settings = StackSettings.from_env(args.state_dir, args.port_base, args.jars_dir)
    serve(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
