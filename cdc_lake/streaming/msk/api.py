"""What every ``kafkaconnect`` call of the deploy and the Dagster client shares: the error they
raise, a look-up by exact name, and bounded polling of a resource's state.

Failure behaviour: ``poll`` returns the description once the state is one of ``done``; a state
in ``failed`` raises ``MskConnectError`` with the resource's name, state and the service's
``stateDescription``/``errorInfo`` (code and message), plus a hint on how to fix it; still
waiting after ``timeout_s`` raises too. Anything else (throttling, access denied) is boto3's
``ClientError``, left to the caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

Sleep = Callable[[float], None]


class MskConnectError(RuntimeError):
    pass


def error_code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def find_by_name(
    client: Any, operation: str, result_key: str, name_key: str, name: str, **params: Any
) -> dict[str, Any] | None:
    """The listed item whose ``name_key`` is exactly ``name``: list_* filters by prefix only,
    so another resource whose name starts with ours is not taken for it."""
    for page in client.get_paginator(operation).paginate(**params):
        for item in page.get(result_key, []):
            if item.get(name_key) == name:
                return item
    return None


def describe_state(desc: Mapping[str, Any]) -> str:
    state = desc.get("stateDescription") or desc.get("errorInfo") or {}
    code, message = state.get("code"), state.get("message")
    return f"{code or 'no code'}: {message or 'no message'}"


def poll(
    what: str,
    fetch: Callable[[], dict[str, Any]],
    state_key: str,
    done: set[str],
    failed: set[str],
    timeout_s: float,
    poll_s: float,
    sleep: Sleep,
    hints: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        desc = fetch()
        state = desc.get(state_key)
        if state in done:
            return desc
        if state in failed:
            hint = (hints or {}).get(state, "")
            raise MskConnectError(f"{what} is {state}: {describe_state(desc)}{hint}")
        if time.monotonic() >= deadline:
            raise MskConnectError(f"{what} is still {state} after {timeout_s:.0f}s")
        sleep(poll_s)
