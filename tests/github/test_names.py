"""GitHub's names are held to what GitHub allows before they become a directory, a git
argument or a URL."""

from __future__ import annotations

import pytest

from service.github.names import validate_branch, validate_repo, validate_sha


def test_names_that_become_paths_or_refspecs_are_checked() -> None:
    assert validate_repo("acme/widgets.js") == ("acme", "widgets.js")
    for bad in ("acme", "acme/..", "../x", "a/b/c", "acme/wid gets"):
        with pytest.raises(ValueError):
            validate_repo(bad)
    assert validate_branch("release/1.2") == "release/1.2"
    for bad in ("-x", "a..b", "a b", "a:b", "x.lock", "/a"):
        with pytest.raises(ValueError):
            validate_branch(bad)


def test_a_sha_is_a_full_sha1_or_sha256_in_lower_case() -> None:
    assert validate_sha("a" * 40) == "a" * 40
    assert validate_sha("0" * 64) == "0" * 64
    for bad in ("a" * 39, "A" * 40, "a" * 41, "g" * 40, "--upload-pack=x", ""):
        with pytest.raises(ValueError, match="not a full commit sha"):
            validate_sha(bad)
