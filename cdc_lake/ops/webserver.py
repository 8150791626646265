"""The Dagster UI behind a token: only the user who can read the token file can use it.

``dagster-webserver`` has no login, so on a shared machine any local user could open the UI on
127.0.0.1 and launch runs with the stack's secrets in their environment. Here the webserver's
app runs in this process behind ``TokenGate``, an ASGI middleware:

- a request passes with the cookie the gate set, or ``Authorization: Bearer <token>``;
- ``?token=<token>`` on a page sets that cookie (HttpOnly, SameSite=Strict, per port) and
  redirects to the same page without the token, so it stays out of the history;
- anything else, the GraphQL API and its websocket included, gets 401 (a websocket is closed
  before it opens). The token is compared in constant time.

The token lives in ``<state>/conf/ui.token`` (0600, made once, never an argument); ``cdc-lake
ui`` prints the URL that carries it. ``python -m cdc_lake.ops.webserver`` serves one workspace file
on one loopback port; the daemon and code servers are separate processes with no TCP port.
"""

from __future__ import annotations

import argparse
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from cdc_lake.stack.process import private_token

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_PARAM = "token"
REFUSED = (
    b"cdc-lake UI: not authorised. Open the URL that `cdc-lake ui` printed (it carries the token "
    b"from <state>/conf/ui.token), or send 'Authorization: Bearer <token>'.\n"
)


def ensure_token(path: Path) -> str:
    """The UI's token in ``path``: read, or made once at random in a 0600 file."""
    return private_token(path)


def cookie_name(port: int) -> str:
    # Browsers share cookies across ports of one host: one name per UI port.
    return f"cdc_lake_ui_{port}"


class TokenGate:
    """ASGI middleware: ``app`` for requests that carry ``token``, 401 for every other one."""

    def __init__(self, app: App, token: str):
        if not token:
            raise ValueError("the UI token is empty")
        self.app, self.token = app, token

    def _matches(self, candidate: str | None) -> bool:
        if candidate is None:
            return False
        return hmac.compare_digest(candidate.encode(), self.token.encode())

    def _presented(self, scope: Scope) -> tuple[str | None, str | None]:
        """The token in the request's cookie or bearer header, and the one in its query."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        port = (scope.get("server") or ("", 0))[1]
        held = None
        if auth := headers.get("authorization", ""):
            scheme, _, value = auth.partition(" ")
            held = value.strip() if scheme.lower() == "bearer" else None
        if held is None and (raw := headers.get("cookie")):
            cookie = SimpleCookie()
            try:
                cookie.load(raw)
            except Exception:  # a malformed cookie header is no token
                cookie = SimpleCookie()
            if (morsel := cookie.get(cookie_name(port))) is not None:
                held = morsel.value
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        return held, query.get(TOKEN_PARAM)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        held, offered = self._presented(scope)
        if self._matches(held):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if self._matches(offered):
            await self._set_cookie_and_redirect(scope, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")],
            }
        )
        await send({"type": "http.response.body", "body": REFUSED})

    async def _set_cookie_and_redirect(self, scope: Scope, send: Send) -> None:
        port = (scope.get("server") or ("", 0))[1]
        rest = [
            (k, v)
            for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
            if k != TOKEN_PARAM
        ]
        location = scope.get("root_path", "") + scope["path"]
        if rest:
            location += f"?{urlencode(rest)}"
        cookie = f"{cookie_name(port)}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location.encode("latin-1")),
                    (b"set-cookie", cookie.encode("latin-1")),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def serve(workspace: Path, host: str, port: int, token_file: Path) -> None:
    """The Dagster webserver app for ``workspace`` on the instance of ``DAGSTER_HOME``, behind
    the gate, on ``host:port`` until interrupted."""
    import uvicorn
    from dagster import DagsterInstance
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster_webserver.app import create_app_from_workspace_process_context
    from dagster_webserver.version import __version__

    token = ensure_token(token_file)
    with (
        DagsterInstance.get() as instance,
        WorkspaceProcessContext(
            instance,
            version=__version__,
            workspace_load_target=WorkspaceFileTarget(paths=[str(workspace)]),
            code_server_log_level="warning",
        ) as context,
    ):
        app = create_app_from_workspace_process_context(context)
        uvicorn.run(TokenGate(app, token), host=host, port=port, log_level="warning")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m cdc_lake.ops.webserver", description=__doc__)
    parser.add_argument("-w", "--workspace", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    args = parser.parse_args(argv)
    serve(args.workspace, args.host, args.port, args.token_file)


if __name__ == "__main__":
    main()
