"""Cache keys for conditional requests name the token by a fingerprint that identifies it
without revealing it, so that a rotated token can never be served another's validators."""

from __future__ import annotations

import hashlib

from service.github.conditional import (
    FINGERPRINT_HEX_DIGITS,
    ConditionalStats,
    cache_key,
    resource_key,
    token_fingerprint,
)
from service.model.etags import resource_of

TOKEN = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"  # the shape of one; not a real token


def test_the_fingerprint_identifies_a_token_without_revealing_it() -> None:
    fingerprint = token_fingerprint(TOKEN)
    assert len(fingerprint) == FINGERPRINT_HEX_DIGITS == 16
    assert fingerprint == hashlib.sha256(TOKEN.encode()).hexdigest()[:16]
    assert TOKEN not in fingerprint and fingerprint not in TOKEN
    assert token_fingerprint(TOKEN + "x") != fingerprint


def test_a_key_is_the_resource_then_the_token_and_two_tokens_share_the_resource() -> None:
    resource = resource_key(31, "application/vnd.github+json",
                            "/repos/acme/widgets/pulls?state=all")
    assert resource == "gh:v1:i31:application/vnd.github+json /repos/acme/widgets/pulls?state=all"
    old = cache_key(resource, token_fingerprint("ghs_old"))
    new = cache_key(resource, token_fingerprint("ghs_new"))
    assert old != new
    # The cache's own rule reads the same split: both variants are one resource.
    assert resource_of(old) == resource_of(new) == resource
    other = resource_key(32, "application/vnd.github+json",
                         "/repos/acme/widgets/pulls?state=all")
    assert resource_of(cache_key(other, token_fingerprint("ghs_old"))) != resource


def test_a_snapshot_does_not_move_with_the_counters() -> None:
    stats = ConditionalStats(sent_validators=3, not_modified=2, first_requests=1)
    snapshot = stats.snapshot()
    stats.after_rotation += 5
    stats.sent_validators += 1
    assert snapshot == ConditionalStats(sent_validators=3, not_modified=2, first_requests=1,
                                        after_rotation=0)
