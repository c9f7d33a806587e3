"""A pull request's review threads through the simulator's GraphQL: read as the App sees
them, resolved when the App resolves them, and a GraphQL failure said as one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from service.github.threads import (
    GraphQLFailed,
    graphql,
    resolve_thread,
    review_threads,
)
from tests.publisher_rig import (  # noqa: F401 - the `rig` fixture
    ANCHORED,
    BOT,
    REPO,
    Rig,
    publisher_rig,
)
from tests.simulator.models import Reaction


async def _posted_inline(rig: Rig) -> tuple[int, int]:
    """A pull request with the App's review carrying one inline finding; (pr, comment id)."""
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(replace(ANCHORED, fingerprint="a" * 32),))
    await rig.publisher().publish_key(run.dedupe_key)
    (inline,) = rig.inline(pr)
    return pr.number, inline.id


@pytest.mark.anyio
async def test_threads_read_through_graphql_with_replies_reactions_and_resolution(
        rig: Rig) -> None:
    number, root = await _posted_inline(rig)
    rig.world.reply_to_review_comment(REPO, number, root, user="bob", body="Won't fix.")
    rig.world.review_comments[root].reactions.append(
        Reaction(id=77, user=rig.world.user("alice"), content="-1", created_at=rig.now()))
    rig.world.resolve_thread(root, user="carol")
    (found,) = await review_threads(rig.github, rig.installation_id, REPO, number)
    assert found.root_id == root and found.resolved and found.resolved_by == "carol"
    assert not found.outdated
    assert [(c.login, c.association) for c in found.comments] == [(BOT, "NONE"),
                                                                   ("bob", "MEMBER")]
    assert found.comments[0].thumbs_down == ("alice",)
    assert found.comments[1].body == "Won't fix."


@pytest.mark.anyio
async def test_on_github_enterprise_server_graphql_is_reached_beside_the_rest_base(
        rig: Rig) -> None:
    """GHES serves REST at https://HOST/api/v3 and GraphQL at https://HOST/api/graphql
    (not under /api/v3): threads are read, and resolved, there."""
    from service.config.secret import Secret
    from service.github.auth import AppJWT
    from service.github.client import GitHubClient
    from tests.publisher_rig import APP_ID
    from tests.simulator import SimulatorTransport
    from tests.simulator.harness import app_key_pair

    number, root = await _posted_inline(rig)
    async with GitHubClient(
            "https://ghe.example.com/api/v3", clock=rig.world.clock.now,
            app_jwt=AppJWT(APP_ID, Secret(app_key_pair()[0]), rig.world.clock.now),
            transport=SimulatorTransport(rig.world, prefix="/api/v3")) as ghes:
        (found,) = await review_threads(ghes, rig.installation_id, REPO, number)
        assert found.root_id == root and not found.resolved
        await resolve_thread(ghes, rig.installation_id, found.id)
        (again,) = await review_threads(ghes, rig.installation_id, REPO, number)
    assert again.resolved
    posts = [r.path for r in rig.world.requests if r.method == "POST"]
    assert "/graphql" in posts


def test_the_graphql_url_follows_the_rest_base() -> None:
    from service.github.urls import graphql_url
    assert graphql_url("https://api.github.com") == "https://api.github.com/graphql"
    assert graphql_url("https://ghe.example.com/api/v3/") == "https://ghe.example.com/api/graphql"
    assert graphql_url("http://127.0.0.1:9000") == "http://127.0.0.1:9000/graphql"


@pytest.mark.anyio
async def test_graphql_errors_come_back_as_github_words_them(rig: Rig) -> None:
    number, _ = await _posted_inline(rig)
    with pytest.raises(GraphQLFailed, match="must provide a `first` or `last` value"):
        await graphql(rig.github, rig.installation_id, """
            query($n: Int!) { repository(owner: "acme", name: "widgets") {
              pullRequest(number: $n) { reviewThreads { totalCount } } } }""", {"n": number})
    with pytest.raises(GraphQLFailed) as missing:
        await resolve_thread(rig.github, rig.installation_id, "PRRT_nope")
    assert missing.value.kind == "NOT_FOUND"
    with pytest.raises(GraphQLFailed) as hidden:
        await review_threads(rig.github, rig.installation_id, "someone/else", 1)
    assert hidden.value.kind == "NOT_FOUND"


@pytest.mark.anyio
async def test_resolving_needs_pull_requests_write(rig: Rig) -> None:
    number, root = await _posted_inline(rig)
    (found,) = await review_threads(rig.github, rig.installation_id, REPO, number)
    for token in rig.world.tokens.values():  # the installation's grant narrowed to read
        token.permissions["pull_requests"] = "read"
    with pytest.raises(GraphQLFailed) as refused:
        await resolve_thread(rig.github, rig.installation_id, found.id)
    assert refused.value.kind == "FORBIDDEN"
    assert root not in rig.world.thread_resolutions
