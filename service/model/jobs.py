"""What a trigger asks for: one unit of review work, and the dedupe keys that name it.

Both ingest paths (webhook and poller) build the same ``Job`` for the same event, so
whichever sees it first enqueues it and the other is a no-op on ``dedupe_key``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["pr_opened", "mention"]
Command = Literal["review", "describe", "ask"]
#: Every command a mention can carry.
COMMANDS: tuple[Command, ...] = ("review", "describe", "ask")
CommentSource = Literal["issue", "review"]


def pr_opened_key(repo: str, number: int, head_sha: str) -> str:
    """``pr_opened:{owner}/{name}:{number}:{head_sha}``: a pull request to auto-review."""
    return f"pr_opened:{repo}:{number}:{head_sha}"


def mention_key(repo: str, number: int, comment_id: int) -> str:
    """``mention:{owner}/{name}:{number}:{comment_id}``: a comment that asked."""
    return f"mention:{repo}:{number}:{comment_id}"


@dataclass(frozen=True)
class Job:
    """A queue row to be: what to review, for whom, and why.

    ``actor_id`` is who the work is charged to: the pull request's author for
    ``pr_opened``, the comment's author for ``mention``. ``comment_id`` and
    ``comment_source`` are set together for a mention and are both ``None`` for
    ``pr_opened`` (nobody wrote a comment to acknowledge).
    """

    kind: Kind
    repo: str
    pr_number: int
    actor_id: int
    head_sha: str | None = None
    comment_id: int | None = None
    comment_source: CommentSource | None = None
    command: Command = "review"

    def __post_init__(self) -> None:
        if self.kind == "pr_opened":
            if not self.head_sha:
                raise ValueError("a pr_opened job needs the head sha it reviews")
            if self.comment_id is not None or self.comment_source is not None:
                raise ValueError("a pr_opened job has no comment")
        elif self.kind == "mention":
            if self.comment_id is None or self.comment_source is None:
                raise ValueError("a mention job needs comment_id and comment_source together")
        else:
            raise ValueError(f"unknown job kind {self.kind!r}")
        if self.command not in COMMANDS:
            raise ValueError(f"unknown command {self.command!r}")
        if self.command == "ask" and self.kind != "mention":
            raise ValueError("only a comment can ask a question")

    @property
    def dedupe_key(self) -> str:
        if self.kind == "pr_opened":
            assert self.head_sha is not None
            return pr_opened_key(self.repo, self.pr_number, self.head_sha)
        assert self.comment_id is not None
        return mention_key(self.repo, self.pr_number, self.comment_id)
