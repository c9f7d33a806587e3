"""A job is what a trigger asks for, named by one dedupe key whichever path built it; a job
that cannot be true is refused when it is made."""

from __future__ import annotations

from typing import Any

import pytest

from service.model.jobs import Job, mention_key, pr_opened_key

HEAD = "a" * 40


def test_each_kind_is_named_by_its_dedupe_key() -> None:
    opened = Job("pr_opened", "acme/widgets", 7, actor_id=1, head_sha=HEAD)
    asked = Job("mention", "acme/widgets", 7, actor_id=2, comment_id=99,
                comment_source="review", command="describe")
    assert opened.dedupe_key == pr_opened_key("acme/widgets", 7, HEAD) == (
        f"pr_opened:acme/widgets:7:{HEAD}")
    assert asked.dedupe_key == mention_key("acme/widgets", 7, 99) == "mention:acme/widgets:7:99"


def test_the_same_event_makes_the_same_job() -> None:
    """Webhook and poller build equal jobs, so whichever enqueues second is a no-op."""
    assert Job("mention", "o/r", 1, 5, comment_id=3, comment_source="issue") == Job(
        "mention", "o/r", 1, 5, comment_id=3, comment_source="issue")


@pytest.mark.parametrize(("fields", "why"), [
    ({"kind": "pr_opened"}, "needs the head sha"),
    ({"kind": "pr_opened", "head_sha": HEAD, "comment_id": 1, "comment_source": "issue"},
     "has no comment"),
    ({"kind": "mention", "comment_id": 1}, "comment_id and comment_source together"),
    ({"kind": "mention", "comment_source": "issue"}, "comment_id and comment_source together"),
    ({"kind": "push", "head_sha": HEAD}, "unknown job kind"),
    ({"kind": "pr_opened", "head_sha": HEAD, "command": "explain"}, "unknown command"),
    ({"kind": "pr_opened", "head_sha": HEAD, "command": "ask"}, "only a comment can ask"),
])
def test_a_job_that_cannot_be_true_is_refused(fields: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Job(repo="o/r", pr_number=1, actor_id=1, **fields)
