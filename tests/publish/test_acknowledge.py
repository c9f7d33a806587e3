"""Where the 👀 goes: the mention's comment, or the pull request."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from service.model.jobs import Job
from service.publish.acknowledge import reaction_path
from service.storage.queue import Claim, Lease

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)



def _claim(**fields: Any) -> Claim:
    base: dict[str, Any] = {
        "kind": "mention", "repo": "o/r", "pr_number": 7, "head_sha": None,
        "actor_id": 1, "comment_id": 55, "comment_source": "issue", "command": "review"}
    base.update(fields)
    return Claim(job=Job(**base),
                 lease=Lease(owner="h:1:0", until=T0, attempt=1))


def test_the_ack_goes_on_the_comment_or_the_pull_request() -> None:
    assert reaction_path(_claim()) == "/repos/o/r/issues/comments/55/reactions"
    assert reaction_path(_claim(comment_source="review")) == (
        "/repos/o/r/pulls/comments/55/reactions")
    assert reaction_path(_claim(kind="pr_opened", comment_id=None, comment_source=None,
                                head_sha="a" * 40)) == "/repos/o/r/issues/7/reactions"
    with pytest.raises(ValueError, match="repository"):
        reaction_path(_claim(repo="../x"))
