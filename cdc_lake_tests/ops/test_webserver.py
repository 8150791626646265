"""The UI's token gate (``cdc_lake/ops/webserver.py``) on a stand-in app: what passes, what is
refused, and how the URL with the token becomes a cookie. ``test_instance.py`` plays the same
against the real webserver, as another local user too."""

from __future__ import annotations

import stat

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket, WebSocketDisconnect

from cdc_lake.ops.webserver import TokenGate, cookie_name, ensure_token

TOKEN = "s3cr3t-token"


async def _page(request):
    return PlainTextResponse(f"inside {request.url.path}")


async def _socket(ws: WebSocket):
    await ws.accept()
    await ws.send_text("inside")
    await ws.close()


@pytest.fixture
def client() -> TestClient:
    app = Starlette(routes=[Route("/{path:path}", _page), WebSocketRoute("/graphql", _socket)])
    # TestClient's server is ("testserver", 80): the cookie is the one for port 80.
    return TestClient(TokenGate(app, TOKEN), base_url="http://testserver")


def test_without_the_token_every_request_is_refused(client: TestClient):
    for path in ("/", "/graphql", "/server_info", "/runs?x=1"):
        answer = client.get(path)
        assert answer.status_code == 401 and "inside" not in answer.text
        assert "cdc-lake ui" in answer.text  # says how to get in
    assert client.post("/graphql", json={"query": "{ version }"}).status_code == 401
    for wrong in ("", "s3cr3t", TOKEN + "x", TOKEN.upper()):
        assert client.get(f"/?token={wrong}").status_code == 401
        assert client.get("/", headers={"Authorization": f"Bearer {wrong}"}).status_code == 401
        client.cookies.set(cookie_name(80), wrong)
        assert client.get("/").status_code == 401
    client.cookies.clear()
    assert client.get("/", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401


def test_the_bearer_header_passes():
    app = Starlette(routes=[Route("/{path:path}", _page)])
    client = TestClient(TokenGate(app, TOKEN))
    answer = client.get("/graphql", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200 and answer.text == "inside /graphql"


def test_the_url_with_the_token_sets_the_cookie_and_drops_the_token(client: TestClient):
    answer = client.get(f"/runs?a=1&token={TOKEN}&b=2", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/runs?a=1&b=2"
    cookie = answer.headers["set-cookie"]
    assert cookie == f"{cookie_name(80)}={TOKEN}; Path=/; HttpOnly; SameSite=Strict"
    assert client.get("/runs").text == "inside /runs"  # the client keeps the cookie


def test_a_websocket_opens_only_with_the_cookie(client: TestClient):
    with pytest.raises(WebSocketDisconnect) as refused, client.websocket_connect("/graphql"):
        pass
    assert refused.value.code == 1008
    client.cookies.set(cookie_name(80), TOKEN)
    with client.websocket_connect("/graphql") as ws:
        assert ws.receive_text() == "inside"


def test_an_empty_token_is_refused_at_start():
    with pytest.raises(ValueError, match="empty"):
        TokenGate(Starlette(), "")


def test_the_token_is_made_once_in_a_private_file(tmp_path):
    path = tmp_path / "conf" / "ui.token"
    token = ensure_token(path)
    assert len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_token(path) == token
