"""A repository's own config, applied to one job (pure).

The worker reads the repository's ``.github/pr-review-agent.yml`` afresh for every job
(``RepositoryConfigs.fresh``) and applies it here: ``settings_for`` gives the job's
settings (excluded paths added to the operator's, the guidelines file, the instructions,
the language), ``declined_by`` says whether an automatic review is one the repository
has turned off since the ingest decided on an older read (a mention is always answered).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from service.repo_config.keys import RepoSettings

if TYPE_CHECKING:
    from service.worker.job import JobSettings

__all__ = ["declined_by", "settings_for"]


def settings_for(base: JobSettings, settings: RepoSettings) -> JobSettings:
    """``base`` (the operator's) with a repository's keys applied where it sets them."""
    changes: dict[str, object] = {}
    if settings.excluded_paths:
        # Added to the operator's, never replacing them: a repository cannot un-exclude.
        extra = tuple(p for p in settings.excluded_paths if p not in base.excluded_paths)
        changes["excluded_paths"] = base.excluded_paths + extra
    if settings.guidelines is not None:
        changes["guideline_paths"] = (settings.guidelines,)
    if settings.instructions is not None:
        changes["instructions"] = settings.instructions
    if settings.language is not None:
        changes["language"] = settings.language
    if settings.fail_on_set:
        changes["checks"] = replace(base.checks, fail_on=settings.fail_on)
    return replace(base, **changes) if changes else base  # type: ignore[arg-type]


def declined_by(settings: RepoSettings, *, draft: bool, pushed: bool) -> str | None:
    """The key of the repository's file that turns this automatic review off, as
    ``auto_review: false``, or None. Only keys the file sets can decline: the operator's
    own switches were applied when the trigger was taken."""
    if settings.auto_review is False:
        return "auto_review: false"
    if pushed and settings.on_push is False:
        return "on_push: false"
    if draft and settings.drafts is not True:
        # A draft is taken only where a file says `drafts: true` (or it became a draft
        # after the trigger): the same rule the ingest applies.
        return "drafts: false" if settings.drafts is False else "drafts (not set)"
    return None
