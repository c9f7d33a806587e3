"""What a job takes from the repository beside the diff: its own config, and the code
each finding points at.

The worker reads the repository's ``.github/pr-review-agent.yml`` afresh for every job
(``RepositoryConfigs.fresh``): ``for_repository`` gives what the review reads beside the
operator's config (excluded paths added to the operator's, the guidelines file, the
instructions, each path's instructions, the language), and ``declined_by`` says whether
an automatic review is one the repository has turned off since the ingest decided on an
older read (a mention is always answered).
``fingerprinted`` gives each finding the engine returned its fingerprint, from the code it
points at in the commit it is anchored on (``service.model.fingerprint``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from service.config.repository.keys import PathInstruction, RepoSettings
from service.config.schema import Config
from service.engine.base import Finding
from service.github.pulls import PullRequest
from service.model.fingerprint import fingerprint, pointed_at
from service.review.checkout import BareRepo

__all__ = ["GUIDELINE_PATHS", "RepositoryReview", "declined_by", "fingerprinted",
           "for_repository"]

#: Review guidelines are read from the BASE commit (never the head, which the author of
#: the pull request controls): the first of these files that exists. A file written for
#: reviews comes first; then the agents' files most repositories already have
#: (``AGENTS.md``, which Copilot, pr-agent and most agents read; ``CLAUDE.md``).
GUIDELINE_PATHS: Final = ("REVIEW.md", ".github/REVIEW.md", "AGENTS.md", "CLAUDE.md")


@dataclass(frozen=True)
class RepositoryReview:
    """What a review of one repository reads beside the operator's config: the keys its
    own file may set, with the operator's applied where the file is silent."""

    excluded_paths: tuple[str, ...]
    guideline_paths: tuple[str, ...] = GUIDELINE_PATHS
    instructions: str | None = None
    language: str | None = None
    path_instructions: tuple[PathInstruction, ...] = ()


def for_repository(config: Config, settings: RepoSettings) -> RepositoryReview:
    """The operator's ``config`` with a repository's file ``settings`` applied."""
    operator = config.review.excluded_paths
    return RepositoryReview(
        # Added to the operator's, never replacing them: a repository cannot un-exclude.
        excluded_paths=operator + tuple(p for p in settings.excluded_paths or ()
                                        if p not in operator),
        guideline_paths=(GUIDELINE_PATHS if settings.guidelines is None
                         else (settings.guidelines,)),
        instructions=settings.instructions, language=settings.language,
        path_instructions=settings.path_instructions or ())


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


async def fingerprinted(bare: BareRepo, pull: PullRequest, findings: tuple[Finding, ...]
                        ) -> tuple[Finding, ...]:
    """``findings`` with their fingerprints, from the commit each is anchored on (the
    head for ``RIGHT``, the base for ``LEFT``), each file read once."""
    files: dict[tuple[str, str], str] = {}
    out = []
    for f in findings:
        sha = pull.head_sha if f.side == "RIGHT" else pull.base_sha
        if (sha, f.path) not in files:
            files[(sha, f.path)] = await bare.show(sha, f.path) or ""
        code = pointed_at(files[(sha, f.path)], f.start_line or f.line, f.line)
        out.append(replace(f, fingerprint=fingerprint(f.path, f.category, code)))
    return tuple(out)
