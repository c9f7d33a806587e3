"""The publisher: where the agent speaks on GitHub as the App.

- ``github``: ``GitHubPublisher`` — the worker's ``Publisher``: the 👀 acknowledgement,
  reviews (inline where the diff allows, the 422 fallback), descriptions, superseded and
  failed runs, dry run, recording every outcome;
- ``notices``: the one notice a trigger may get when the budget or the pre-flight refuses it;
- ``retry``: re-offering recorded runs that were never published (after a restart too);
- ``compose``: the bodies, pure; ``safety``: cleaning, neutralising and size limits;
- ``markers``: the hidden markers that make "never twice" hold across crashes;
- ``publication``/``records``/``lookup``: the stored run, the store, the GitHub reads.

docs/PUBLISHER.md is the reference.
"""

from service.publisher.github import MAX_ATTEMPTS, PUBLISH_LEASE, GitHubPublisher, PublishResult
from service.publisher.markers import notice_marker, run_marker
from service.publisher.notices import Notices
from service.publisher.retry import republish_pending

__all__ = [
    "MAX_ATTEMPTS",
    "PUBLISH_LEASE",
    "GitHubPublisher",
    "Notices",
    "PublishResult",
    "notice_marker",
    "republish_pending",
    "run_marker",
]
