"""Writing what a trigger's check run should show, inside the caller's transaction.

The worker and the publisher decide how a trigger went; they say so here in the same
transaction that records it (a settle, a run, a publication's outcome), so the check run
can never tell a different story from the store. The check-run loop pushes it to GitHub.
With ``checks.enabled`` off nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from service.config.posting import ChecksConfig
from service.publish.checks import text
from service.storage import checks
from service.storage.checks import CheckState, Target
from service.storage.database import Transaction

__all__ = ["CheckMarks", "check_name"]


def check_name(config: ChecksConfig, command: str) -> str:
    """The check run's name: ``checks.name``, with `` (describe)`` for a description, so a
    description never stands in for the review a branch protection rule requires."""
    return f"{config.name} (describe)" if command == "describe" else config.name


class CheckMarks:
    """Records what check runs should show; ``config`` is read at every use."""

    def __init__(self, config: Callable[[], ChecksConfig]) -> None:
        self._config = config

    @property
    def enabled(self) -> bool:
        return self._config().enabled

    def applies(self, command: str) -> bool:
        """Whether a trigger asking for ``command`` has a check run: a review's or a
        description's does; an answer to a question has none (it is not a verdict on
        the head)."""
        return self.enabled and command != "ask"

    @property
    def fail_on(self) -> str | None:
        return self._config().fail_on

    def target(self, dedupe_key: str, command: str, repo: str, pr_number: int,
               head_sha: str) -> Target:
        return Target(dedupe_key, head_sha, repo, pr_number,
                      check_name(self._config(), command))

    def show(self, tx: Transaction, target: Target, state: CheckState,
             now: datetime) -> None:
        """``target`` should show ``state`` (nothing when check runs are off)."""
        if self.enabled:
            checks.show(tx, target, state, now)

    def start(self, tx: Transaction, target: Target, attempt: int, now: datetime) -> None:
        """A worker has the trigger on ``target``'s head. Any other open check run of the
        trigger (a mention queued on a head the pull request has since left) is completed
        as answered on this one."""
        if not self.enabled:
            return
        checks.show_open(tx, target.dedupe_key, text.moved(target.head_sha), now,
                         except_head=target.head_sha)
        what = "description" if target.name.endswith("(describe)") else "review"
        checks.show(tx, target, text.reviewing(what, target.head_sha, attempt), now)

    def end(self, tx: Transaction, target: Target, state: CheckState, now: datetime) -> None:
        """The trigger ended as ``state``: on ``target``'s head (opened there if the loop
        had not yet), and on any other open check run of it."""
        if self.enabled:
            checks.show_open(tx, target.dedupe_key, state, now)
            checks.show(tx, target, state, now)

    def end_open(self, tx: Transaction, dedupe_key: str, state: CheckState,
                 now: datetime) -> None:
        """Every open check run of the trigger should show ``state`` (an ending decided
        before the head was known, or without one: closed, superseded)."""
        if self.enabled:
            checks.show_open(tx, dedupe_key, state, now)
