"""Organisation, then repository, then operator: a repository's keys over its
organisation's, key by key; a key the operator does not allow ignored and named; a
broken file applying none of its keys."""

from __future__ import annotations

from service.config.repository.keys import RepoSettings
from service.config.repository.merge import Source, merge, triggers
from service.config.repository.parse import parse_repository_file
from service.config.schema import RepositoryConfigConfig, TriggersConfig

ALL = frozenset(RepositoryConfigConfig().allow)
ORG_REPO = "acme/.github"


def source(label: str, text_: str) -> Source:
    return Source(label, parsed=parse_repository_file(text_))



def test_the_repository_overrides_the_organisation_key_by_key() -> None:
    org = source("org", "auto_review: false\nlanguage: de\nexcluded_paths: ['gen/**']\n"
                        "checks:\n  fail_on: major\n")
    repo = source("repo", "auto_review: true\nexcluded_paths: ['*.snap']\n")
    found = merge(org, repo, ALL)
    s = found.settings
    assert (s.auto_review, s.language, s.excluded_paths, s.fail_on) == (
        True, "de", ("*.snap",), "major")
    assert found.applied == ("org", "repo") and found.notes == ()


def test_checks_fail_on_null_in_the_repository_overrides_the_organisations() -> None:
    found = merge(source("org", "checks:\n  fail_on: minor\n"),
                  source("repo", "checks:\n  fail_on: null\n"), ALL)
    assert found.settings.fail_on_set and found.settings.fail_on is None
    from service.config.posting import ChecksConfig
    assert found.fail_on(ChecksConfig(fail_on="critical")) is None
    assert merge(None, None, ALL).fail_on(ChecksConfig(fail_on="critical")) == "critical"


def test_a_key_the_operator_does_not_allow_is_ignored_and_named() -> None:
    allow = ALL - {"auto_review"}
    found = merge(source("org", "auto_review: false\n"),
                  source("repo", "auto_review: false\nlanguage: fr\n"), allow)
    assert found.settings.auto_review is None and found.settings.language == "fr"
    assert found.ignored == ("org: auto_review", "repo: auto_review")
    assert all("the operator does not let a repository set this key" in n for n in found.notes)


def test_a_broken_repository_file_leaves_the_organisations_in_force() -> None:
    found = merge(source("org", "language: de\n"),
                  source("repo", "language: fr\nmin_severty: major\n"), ALL)
    assert found.settings.language == "de"
    assert found.problems == ("repo: line 2: min_severty: unknown key "
                              "(did you mean min_severity?)",)
    assert found.notes[0].endswith("(none of this file's keys were applied)")


def test_the_operators_switches_hold_where_no_file_sets_them() -> None:
    operator = TriggersConfig(auto_review=False, on_push=True)
    assert triggers(operator, RepoSettings()) == triggers(operator, RepoSettings(language="x"))
    got = triggers(operator, RepoSettings(auto_review=True, drafts=True))
    assert (got.auto_review, got.on_push, got.drafts) == (True, True, True)
