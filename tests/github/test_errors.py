"""GitHub's statuses become typed errors that carry GitHub's own message, a body that is
not JSON included."""

from __future__ import annotations

import httpx
import pytest

from service.github.actors import APP
from service.github.errors import (
    Forbidden,
    GitHubError,
    NotAcceptable,
    NotFound,
    Unauthorized,
    Unprocessable,
)
from tests.github.client_kit import (
    FakeClock,
    FakeSleep,
    Script,
    clock,
    err,
    make_client,
    sleep,
)

__all__ = ["clock", "sleep"]  # fixtures


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "error_type"),
    [(401, Unauthorized), (403, Forbidden), (404, NotFound), (410, NotFound),
     (406, NotAcceptable), (422, Unprocessable), (409, GitHubError)],
)
async def test_statuses_map_to_typed_errors(
    clock: FakeClock, sleep: FakeSleep, status: int, error_type: type[GitHubError]
) -> None:
    script = Script(clock, err(status, "nope", **{"x-github-request-id": "ABCD:1234"}))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(error_type) as raised:
            await client.get_json(APP, "/repos/o/r/pulls/1")
    assert raised.value.status == status
    assert raised.value.message == "nope"
    assert raised.value.path == "/repos/o/r/pulls/1"
    assert raised.value.request_id == "ABCD:1234"


@pytest.mark.anyio
async def test_422_carries_githubs_message_and_errors(clock: FakeClock, sleep: FakeSleep) -> None:
    body = {
        "message": "Unprocessable Entity",
        "errors": ["Pull request review thread line must be part of the diff"],
        "documentation_url": "https://docs.github.com/rest/pulls/reviews",
    }
    script = Script(clock, httpx.Response(422, json=body))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(Unprocessable) as raised:
            await client.post_json(1, "/repos/o/r/pulls/1/reviews", {"event": "COMMENT"})
    assert raised.value.message == "Unprocessable Entity"
    assert raised.value.errors == ("Pull request review thread line must be part of the diff",)
    assert raised.value.documentation_url == body["documentation_url"]
    assert "422 POST /repos/o/r/pulls/1/reviews: Unprocessable Entity" == str(raised.value)


@pytest.mark.anyio
async def test_406_too_large_diff(clock: FakeClock, sleep: FakeSleep) -> None:
    body = {
        "message": "Sorry, the diff exceeded the maximum number of files (300).",
        "errors": [{"resource": "PullRequest", "field": "diff", "code": "too_large"}],
    }
    script = Script(clock, httpx.Response(406, json=body))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(NotAcceptable) as raised:
            await client.get_text(1, "/repos/o/r/pulls/1")
    assert raised.value.too_large


@pytest.mark.anyio
async def test_non_json_error_bodies_and_success_bodies(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(clock, httpx.Response(404, text="<html>"), httpx.Response(200, text="nope"),
                    httpx.Response(204))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(NotFound, match="Not Found"):
            await client.get_json(1, "/x")
        with pytest.raises(GitHubError, match="not JSON"):
            await client.get_json(1, "/x")
        await client.delete(1, "/repos/o/r/issues/comments/1")
    assert [r.method for r in script.requests] == ["GET", "GET", "DELETE"]


@pytest.mark.anyio
async def test_bad_actor_is_a_value_error(clock: FakeClock, sleep: FakeSleep) -> None:
    async with make_client(Script(clock), clock, sleep) as client:
        for actor in (0, -1, True, "installation"):
            with pytest.raises(ValueError):
                await client.get_json(actor, "/x")  # type: ignore[arg-type]
