"""Whatever a correctly signed delivery carries, the receiver never answers with a 5xx.

Hypothesis builds deliveries three ways: arbitrary JSON documents under arbitrary event
names, real GitHub payloads with one field replaced by arbitrary JSON (the shapes the
trigger rules actually walk), and arbitrary bytes under arbitrary content types. Every one
is signed with the configured secret, so each reaches the parser, the rules and the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlencode

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.github.webhooks import sign
from tests.kit.thorough import examples
from tests.payload_fuzz import ASCII, EVENTS, json_values, mutated, strings
from tests.webhook_env import SECRET, Env, open_env


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[str, bytes, str]:
    """(event, body, content type)."""
    kind = draw(st.sampled_from(["arbitrary", "mutated", "bytes"]))
    if kind == "bytes":
        content_type = draw(st.sampled_from([
            "application/json", "application/x-www-form-urlencoded", "text/plain", "",
            "application/json; charset=utf-8"]))
        return draw(st.sampled_from(EVENTS)), draw(st.binary(max_size=200)), content_type
    if kind == "mutated":
        event, payload = draw(mutated())
    else:
        event = draw(st.sampled_from(EVENTS) | st.text(ASCII, min_size=1, max_size=30))
        payload = draw(st.dictionaries(strings, json_values, max_size=6))
    text = json.dumps(payload)
    if draw(st.booleans()):
        return event, urlencode({"payload": text}).encode(), "application/x-www-form-urlencoded"
    return event, text.encode(), "application/json"


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal("asyncio") as running:
        yield running


@pytest.fixture(scope="module")
def env(portal: BlockingPortal, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with portal.wrap_async_context_manager(open_env(tmp_path_factory.mktemp("fuzz"))) as opened:
        yield opened


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delivery=deliveries(), delivery_id=st.uuids() | st.text(ASCII, min_size=1, max_size=40),
       extra=st.dictionaries(st.sampled_from(["X-GitHub-Hook-ID", "User-Agent",
                                              "X-GitHub-Hook-Installation-Target-ID"]),
                             st.text(ASCII, max_size=20), max_size=3))
def test_no_correctly_signed_delivery_gets_a_5xx(
        portal: BlockingPortal, env: Env, delivery: tuple[str, bytes, str],
        delivery_id: object, extra: dict[str, str]) -> None:
    event, body, content_type = delivery
    headers = {**extra, "X-GitHub-Event": event, "X-GitHub-Delivery": str(delivery_id),
               "X-Hub-Signature-256": sign(body, SECRET)}
    if content_type:
        headers["Content-Type"] = content_type

    async def post() -> httpx.Response:
        return await env.client.post("/webhook", content=body, headers=headers)

    response = portal.call(post)

    assert response.status_code in (200, 202, 400), response.text
    if response.status_code == 202:
        assert set(response.json()) == {"delivery", "enqueued", "ignored"}
        assert env.delivery(str(delivery_id)) is not None
