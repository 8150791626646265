"""The Dagster UI on the session stack, driven by Playwright in Debian's Chromium.

The webserver (behind the stack's UI token, ``cdc_lake/ops/webserver.py``) and ``dagster-daemon``
run on a fresh instance under the module's tmp dir, sharing one code server on a Unix socket
(``cdc_lake/ops/instance.py``: the stack's settings reach them through their environment). The
browser holds the token's cookie, as after opening the URL ``cdc-lake ui`` prints. They run
after
the sample data went through outbox, Debezium, Kafka and the S3 sink (``ingested``). Chromium
is the one ``cdc-lake stack install`` installs (``chromium_path``); Playwright never downloads
a browser here. Screenshots go under the module's tmp dir; a failing step adds its screenshot's
path to the error.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import pytest

from cdc_lake.ops.instance import (
    code_server,
    daemon,
    prepare_home,
    ui_token_path,
    wait_for_webserver,
    webserver,
)
from cdc_lake.ops.webserver import cookie_name, ensure_token
from cdc_lake.stack import LocalStack
from cdc_lake.stack.install import chromium_path

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


SKIP_DIALOG_JS = """() => {
  const b = [...document.querySelectorAll('button')].find(b => b.innerText.trim() === 'Skip');
  if (b) b.click();
}"""


@dataclass
class Ui:
    url: str
    port: int
    token: str
    instance: dg.DagsterInstance
    shots_dir: Path
    shots: list[Path] = field(default_factory=list)

    def shot(self, page, name: str) -> Path:
        path = self.shots_dir / f"{len(self.shots):02d}-{name}.png"
        # The community dialog would hide the page; a page-level click, as a locator action
        # would wait on the locator handler that dismisses it.
        page.evaluate(SKIP_DIALOG_JS)
        page.screenshot(path=str(path), full_page=True)
        self.shots.append(path)
        return path

    @contextlib.contextmanager
    def step(self, page, name: str) -> Iterator[None]:
        """Screenshot the page at the end of the step, or when it fails (path in the error)."""
        try:
            yield
        except BaseException as e:
            with contextlib.suppress(Exception):
                e.add_note(f"screenshot: {self.shot(page, name + '-FAILED')}")
            e.add_note(f"screenshots so far: {[str(p) for p in self.shots]}")
            raise
        self.shot(page, name)


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
        return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ui(local_stack: LocalStack, ingested, tmp_path_factory) -> Iterator[Ui]:
    settings = local_stack.settings
    port = _free_port()
    home = tmp_path_factory.mktemp("dagster_home")
    home.chmod(0o700)
    socket_path = home / "code.sock"
    prepare_home(home, grpc_socket=socket_path)
    code = code_server(settings, home, socket_path)
    web, bg = webserver(settings, home, port), daemon(settings, home)
    token = ensure_token(ui_token_path(settings))
    code.start()
    try:
        deadline = time.monotonic() + 300
        while not _accepts(socket_path):
            assert code.alive() and time.monotonic() < deadline, code.failure("no code server")
            time.sleep(1)
        web.start()
        bg.start()
        url = wait_for_webserver(web, port, token)
        shots = tmp_path_factory.mktemp("screenshots")
        print(f"\nDagster UI at {url}, screenshots in {shots}")
        yield Ui(url, port, token, dg.DagsterInstance.from_config(str(home)), shots)
    finally:
        bg.stop()
        web.stop()
        code.stop()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    assert executable, "Chromium is missing: run `cdc-lake stack install`"
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),  # a fresh profile
            executable_path=executable,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1600, "height": 1000},
        )
        # Generous: the first page of a fresh webserver is slow on a loaded machine.
        context.set_default_timeout(120_000)
        context.set_default_navigation_timeout(180_000)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser_context, ui: Ui):
    # The cookie the gate sets when the URL with the token is opened (test_webserver.py).
    cookie = {"name": cookie_name(ui.port), "value": ui.token, "url": ui.url}
    browser_context.add_cookies([cookie])
    page = browser_context.new_page()
    # A fresh profile gets Dagster's community dialog over the page: dismiss it when it shows.
    page.add_locator_handler(page.get_by_role("button", name="Skip"), lambda b: b.click())
    yield page
    page.close()
