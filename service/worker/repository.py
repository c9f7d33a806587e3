"""A repository's own config, applied to one job (pure).

The worker reads the repository's ``.github/pr-review-agent.yml`` afresh for every job
(``RepositoryConfigs.fresh``): ``JobSettings.for_repository`` gives the job's settings
(excluded paths added to the operator's, the guidelines file, the instructions, the
language), and ``declined_by`` here says whether an automatic review is one the repository
has turned off since the ingest decided on an older read (a mention is always answered).
"""

from __future__ import annotations

from service.repo_config.keys import RepoSettings

__all__ = ["declined_by"]


def declined_by(settings: RepoSettings, *, draft: bool, pushed: bool) -> str | None:
    """The key of the repository's file that turns this automatic review off, as
    ``auto_review: false``, or None. The operator's own switches were applied when the
    trigger was taken; a draft is taken only where a file says ``drafts: true``."""
    if settings.auto_review is False:
        return "auto_review: false"
    if pushed and settings.on_push is False:
        return "on_push: false"
    if draft and settings.drafts is not True:
        # A draft is taken only where a file says `drafts: true` (or it became a draft
        # after the trigger): the same rule the ingest applies.
        return "drafts: false" if settings.drafts is False else "drafts (not set)"
    return None
