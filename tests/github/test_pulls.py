"""A pull request as the App reads it from GitHub's JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from service.github.pulls import parse_pull

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)



def _pull(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "number": 7, "state": "open", "draft": False, "title": "T", "body": None,
        "created_at": "2026-03-01T12:00:00Z", "updated_at": "2026-03-01T12:30:00Z",
        "merged": False, "user": {"id": 11},
        "head": {"sha": "b" * 40, "ref": "feature"},
        "base": {"sha": "a" * 40, "ref": "main",
                 "repo": {"clone_url": "https://github.com/o/r.git"}}}
    data.update(over)
    return data


def test_parse_pull() -> None:
    pull = parse_pull(_pull())
    assert (pull.open, pull.merged, pull.body, pull.author_id) == (True, False, "", 11)
    assert pull.clone_url == "https://github.com/o/r.git" and pull.base_ref == "main"
    closed = parse_pull(_pull(state="closed", merged=True))
    assert not closed.open and closed.merged
    with pytest.raises(ValueError, match=r"head\.sha"):
        parse_pull(_pull(head={"sha": 5}))
    with pytest.raises(ValueError, match="branch"):
        parse_pull(_pull(base={"sha": "a" * 40, "ref": "x:refs/heads/y",
                               "repo": {"clone_url": "u"}}))
    with pytest.raises(ValueError, match="sha"):
        parse_pull(_pull(head={"sha": "HEAD"}))
    with pytest.raises(ValueError, match="object"):
        parse_pull([])
