"""What a review takes from a repository's own file: its exclusions added to the operator's
(never removed), its guidelines file, its instructions and language; and which of its
switches turns an automatic review off."""

from __future__ import annotations

from dataclasses import replace

import pytest

from service.config.repository.keys import RepoSettings
from service.review.repository import (
    GUIDELINE_PATHS,
    RepositoryReview,
    declined_by,
    for_repository,
)
from tests.worker_helpers import job_config


def test_a_repositorys_file_adds_to_the_operators_exclusions_and_names_its_guidelines(
        ) -> None:
    config = job_config()
    config = replace(config, review=replace(config.review, excluded_paths=("*.lock",)))
    reading = for_repository(config, RepoSettings(
        excluded_paths=("*.lock", "docs/**"), guidelines="docs/REVIEWING.md",
        instructions="Be brief.", language="de"))
    assert reading == RepositoryReview(
        excluded_paths=("*.lock", "docs/**"), guideline_paths=("docs/REVIEWING.md",),
        instructions="Be brief.", language="de")
    assert for_repository(config, RepoSettings()) == RepositoryReview(
        excluded_paths=("*.lock",), guideline_paths=GUIDELINE_PATHS)


@pytest.mark.parametrize(("settings", "draft", "pushed", "declined"), [
    (RepoSettings(), False, False, None),
    (RepoSettings(auto_review=False), False, False, "auto_review: false"),
    (RepoSettings(on_push=False), False, True, "on_push: false"),
    (RepoSettings(on_push=False), False, False, None),  # not a push: on_push is not asked
    (RepoSettings(), True, False, "drafts (not set)"),
    (RepoSettings(drafts=False), True, False, "drafts: false"),
    (RepoSettings(drafts=True), True, False, None),
])
def test_the_key_that_turns_an_automatic_review_off(settings: RepoSettings, draft: bool,
                                                     pushed: bool, declined: str | None) -> None:
    assert declined_by(settings, draft=draft, pushed=pushed) == declined
