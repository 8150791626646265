"""A small Kafka Connect REST client: create or update a connector, wait for it, explain failures.

``ensure_connector`` is idempotent. An unchanged config is not PUT again, because a PUT restarts
the connector. A connector or task left FAILED by an earlier run (a sink task whose bucket was
missing, say) is restarted after its config is applied (``restart_failed``), so rerunning after
a fix works; it resumes from its committed offsets, so nothing is lost.

Every failure raises ``ConnectError`` with the cause: Connect unreachable, credentials refused,
config rejected (with the validation messages), or a FAILED connector/task (with the worker's
stack trace).

Authentication: ``auth`` (user, password) is sent as HTTP basic auth on every request; the local
worker refuses requests without it (``BasicAuthSecurityRestExtension``). The password is never
part of a message or the URL.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol

from cdc_lake.streaming.connector_health import failed_components, failure_trace


class ConnectError(RuntimeError):
    pass


class Connectors(Protocol):
    """What the pipeline asks of wherever its connectors run: ``ConnectClient`` (a Kafka Connect
    REST endpoint) and ``MskConnectClient`` (Amazon MSK Connect) both answer it, and
    ``ConnectResource.client()`` returns one. ``status`` is Connect's status shape
    (``{"connector": {"state"}, "tasks": [{"id", "state", "trace"?}]}``) or None when there is
    no such connector."""

    def connectors(self) -> list[str]: ...

    def status(self, name: str) -> dict[str, Any] | None: ...

    def deploy(
        self,
        name: str,
        config: dict[str, str],
        timeout_s: float,
        log: Callable[[str], None] | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """Create or update the connector and wait for it to run: (action, status)."""
        ...

    def restart_failed(self, name: str) -> list[str]:
        """Restart what of the connector is FAILED; what was restarted (empty: nothing)."""
        ...


def basic_auth_header(auth: tuple[str, str]) -> dict[str, str]:
    token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


# What a worker answers while it cannot serve a request yet: a rebalance (409), a request its
# herder did not finish in time (500, "Request timed out"), or not ready (503).
TRANSIENT_STATUSES = (409, 500, 503)


class ConnectClient:
    def __init__(
        self,
        url: str,
        timeout_s: float = 15.0,
        auth: tuple[str, str] | None = None,
        transient_wait_s: float = 60.0,
    ):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._auth = auth
        self.transient_wait_s = transient_wait_s

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One REST call: (HTTP status, decoded JSON body). Refused credentials raise."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._auth:
            headers |= basic_auth_header(self._auth)
        req = urllib.request.Request(f"{self.url}{path}", data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            if e.code == 401:
                raise ConnectError(
                    f"Kafka Connect at {self.url} refused {method} {path} (401 Unauthorized): "
                    f"{'wrong' if self._auth else 'no'} credentials. Fix: set the Connect user "
                    "and password (locally the stack's, CDC_LAKE_CONNECT_PASSWORD; `cdc-lake "
                    "stack status --json` prints them)."
                ) from None
            raw = e.read()
            try:
                payload = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                payload = {"message": raw.decode(errors="replace")}
            return e.code, payload
        except (urllib.error.URLError, OSError) as e:
            raise ConnectError(
                f"Kafka Connect at {self.url} is unreachable ({getattr(e, 'reason', e)}). "
                "Fix: start it (`cdc-lake stack up` locally) or correct the Connect URL setting."
            ) from e

    def _ok(self, method: str, path: str, body: Any = None) -> Any:
        status, payload = self.request(method, path, body)
        if status >= 400:
            message = payload.get("message") if isinstance(payload, dict) else payload
            raise ConnectError(f"Kafka Connect {method} {path} failed ({status}): {message}")
        return payload

    def plugins(self) -> list[dict[str, str]]:
        return self._ok("GET", "/connector-plugins?connectorsOnly=true")

    def connectors(self) -> list[str]:
        return self._ok("GET", "/connectors")

    def _get_or_none(self, name: str, what: str) -> Any:
        """A read of the connector's ``what``; None if there is no such connector. A read is
        idempotent, so an answer that says "not now" (409 while the workers rebalance, 500 for
        a request the herder timed out, 503) is asked again, for up to ``transient_wait_s``;
        then, or on any other error, it raises with the worker's message."""
        deadline = time.monotonic() + self.transient_wait_s
        while True:
            status, payload = self.request("GET", f"/connectors/{urllib.parse.quote(name)}/{what}")
            if status == 404:
                return None
            if status < 400:
                return payload
            if status not in TRANSIENT_STATUSES or time.monotonic() >= deadline:
                message = payload.get("message") if isinstance(payload, dict) else payload
                raise ConnectError(
                    f"Kafka Connect: reading {name}'s {what} failed ({status}): {message}"
                )
            time.sleep(1.0)

    def config(self, name: str) -> dict[str, str] | None:
        return self._get_or_none(name, "config")

    def status(self, name: str) -> dict[str, Any] | None:
        return self._get_or_none(name, "status")

    def validate(self, config: dict[str, str]) -> list[str]:
        """Config errors as 'key: message' lines (empty when valid)."""
        cls = config["connector.class"].rsplit(".", 1)[-1]
        payload = self._ok("PUT", f"/connector-plugins/{cls}/config/validate", config)
        errors = []
        for item in payload.get("configs", []):
            value = item.get("value", {})
            for err in value.get("errors", []):
                errors.append(f"{value.get('name')}: {err}")
        return errors

    def put_config(self, name: str, config: dict[str, str]) -> bool:
        """Create or update; returns True if the connector was created."""
        status, payload = self.request(
            "PUT", f"/connectors/{urllib.parse.quote(name)}/config", config
        )
        if status >= 400:
            message = payload.get("message") if isinstance(payload, dict) else payload
            raise ConnectError(f"Kafka Connect rejected connector {name!r} ({status}): {message}")
        return status == 201

    def create(self, name: str, config: dict[str, str], initial_state: str = "RUNNING") -> None:
        """POST a new connector; ``initial_state`` STOPPED or PAUSED creates it without running
        it (KIP-980)."""
        body = {"name": name, "config": config, "initial_state": initial_state}
        self._ok("POST", "/connectors", body)

    def restart(self, name: str, only_failed: bool = True) -> None:
        q = f"includeTasks=true&onlyFailed={'true' if only_failed else 'false'}"
        self._ok("POST", f"/connectors/{urllib.parse.quote(name)}/restart?{q}")

    def restart_failed(self, name: str, settle_s: float = 30.0) -> list[str]:
        """Restart whatever of the connector is FAILED (``connector``, ``task N``), in one call
        (``restart?includeTasks=true&onlyFailed=true``), and wait up to ``settle_s`` until the
        worker no longer reports it FAILED (the restart is asynchronous). Returns what was
        restarted with the first line of its trace; empty when nothing had failed."""
        failed = failed_components(self.status(name))
        if not failed:
            return []
        self.restart(name, only_failed=True)
        deadline = time.monotonic() + settle_s
        while failed_components(self.status(name)) and time.monotonic() < deadline:
            time.sleep(0.5)
        return failed

    def pause(self, name: str) -> None:
        self._ok("PUT", f"/connectors/{urllib.parse.quote(name)}/pause")

    def resume(self, name: str) -> None:
        self._ok("PUT", f"/connectors/{urllib.parse.quote(name)}/resume")

    def delete(self, name: str) -> None:
        status, _ = self.request("DELETE", f"/connectors/{urllib.parse.quote(name)}")
        if status >= 400 and status != 404:
            raise ConnectError(f"Kafka Connect: deleting {name} failed ({status})")

    def ensure_connector(self, name: str, config: dict[str, str]) -> str:
        """Apply the config; returns 'created', 'updated' or 'unchanged'."""
        current = self.config(name)
        wanted = {**config, "name": name}
        if current is not None and current == wanted:
            action = "unchanged"
        else:
            created = self.put_config(name, config)
            action = "created" if created else "updated"
        self.restart_failed(name)
        return action

    def deploy(
        self,
        name: str,
        config: dict[str, str],
        timeout_s: float,
        log: Callable[[str], None] | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """Validate, create or update, and wait for RUNNING; returns (action, status)."""
        errors = self.validate({**config, "name": name})
        if errors:
            raise ConnectError(f"connector {name!r} config is invalid: " + "; ".join(errors))
        action = self.ensure_connector(name, config)
        if log:
            log(f"connector {name}: {action}; waiting for RUNNING")
        return action, self.wait_running(name, timeout_s=timeout_s)

    def wait_running(
        self,
        name: str,
        timeout_s: float = 120.0,
        poll_s: float = 1.0,
        log: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Wait for the connector and all its tasks to be RUNNING; raise with the trace if any
        of them FAILED."""
        deadline = time.monotonic() + timeout_s
        last: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            last = self.status(name)
            if last is not None:
                failure = failure_trace(last)
                if failure:
                    raise ConnectError(f"connector {name!r} FAILED: {failure}")
                tasks = last.get("tasks", [])
                if (
                    last["connector"]["state"] == "RUNNING"
                    and tasks
                    and all(t["state"] == "RUNNING" for t in tasks)
                ):
                    return last
            time.sleep(poll_s)
        states = json.dumps(last) if last else "not found"
        raise ConnectError(f"connector {name!r} not RUNNING after {timeout_s:.0f}s: {states}")
