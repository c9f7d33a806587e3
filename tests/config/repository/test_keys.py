"""A repository file's keys, declared once: the docs table is rendered from them, and a
file's settings name the keys it sets."""

from __future__ import annotations

import re

from service.config.describe import repository_key_table
from service.config.repository.keys import FIELDS, KEYS, RepoSettings
from tests.kit.paths import CHECKOUT

ROOT = CHECKOUT
DOC = ROOT / "docs" / "REPOSITORY-CONFIG.md"


def test_the_docs_table_lists_every_declared_key_with_its_default() -> None:
    doc = DOC.read_text()
    for key in KEYS:
        assert f"| `{key.name}` | {key.inherits} | {key.doc} |" in doc, key.name
    assert repository_key_table() in doc
    rows = re.findall(r"^\| `([\w.]+)` \|", doc, flags=re.M)
    assert rows == [k.name for k in KEYS]


def test_a_files_settings_name_the_keys_it_sets_and_only_those() -> None:
    assert RepoSettings().names() == ()
    assert RepoSettings(drafts=False, max_findings=3).names() == ("drafts", "max_findings")
    # `checks.fail_on: null` is set (to "never"); a file without it is not.
    assert RepoSettings(fail_on_set=True).names() == ("checks.fail_on",)
    assert RepoSettings(fail_on="major").names() == ()


def test_every_key_is_optional_and_says_what_holds_when_no_file_sets_it() -> None:
    assert [k.name for _, k in FIELDS] == [k.name for k in KEYS]
    for field, key in FIELDS:
        assert getattr(RepoSettings(), field) is None, key.name
        assert key.inherits and key.example is not None, key.name
    assert dict(FIELDS)["fail_on"].name == "checks.fail_on"

