"""Which repositories a poll covers: the installations' listings, the operator's
allowlist, and what a failed listing keeps."""

from __future__ import annotations

from service.github.installations import Repository
from service.intake.poller.targets import Discovery, Target, missing_from, select_targets


def repo(full_name: str, archived: bool = False) -> Repository:
    return Repository(id=abs(hash(full_name)) % 10_000, full_name=full_name, private=True,
                      archived=archived)


def test_targets_follow_the_listing_and_the_allowlist() -> None:
    found = Discovery(installations={1, 2}, repositories={
        1: [repo("Acme/Widgets"), repo("acme/old", archived=True)], 2: [repo("beta/tools")]})
    assert select_targets(found, (), []) == [Target(1, "Acme/Widgets"), Target(2, "beta/tools")]
    assert select_targets(found, ("acme/widgets",), []) == [Target(1, "Acme/Widgets")]
    assert missing_from([Target(1, "Acme/Widgets")], ("acme/widgets", "acme/nope")) == [
        "acme/nope"]


def test_a_failed_listing_keeps_its_targets_and_a_gone_installation_loses_them() -> None:
    previous = [Target(1, "acme/a"), Target(2, "beta/b"), Target(3, "gone/c")]
    found = Discovery(installations={1, 2}, repositories={1: [repo("acme/a2")]},
                      failures={"installation 2": "502"})
    assert select_targets(found, (), previous) == [Target(1, "acme/a2"), Target(2, "beta/b")]
    suspended = Discovery(installations={1, 2}, suspended={2}, repositories={1: []})
    assert select_targets(suspended, (), previous) == []
    nothing = Discovery(failures={"installations": "401"})
    assert select_targets(nothing, (), previous) == sorted(previous)
    assert not nothing.complete
