"""The config's declarations are its one source: every key read, documented and
defaulted from one place. These tests fail when the reference in docs/CONFIG.md, the
dataclasses or the summary ``check-config`` prints drift from the declarations."""

from __future__ import annotations

import dataclasses
import re

from service.config.checks import SECTION_CHECKS
from service.config.connections import GitHubConfig
from service.config.declare import REQUIRED, keys_of
from service.config.describe import describe_config, key_tables
from service.config.schema import SECTIONS, BudgetConfig, Config, TriggersConfig
from service.config.secret import Secret
from tests.kit.paths import CHECKOUT

ROOT = CHECKOUT
CONFIG_DOC = ROOT / "docs" / "CONFIG.md"


def _every_key_section() -> str:
    text = CONFIG_DOC.read_text()
    return text[text.index("## Every key"):text.index("## The budget")]


def test_each_section_table_in_the_docs_is_rendered_from_the_declarations() -> None:
    doc = _every_key_section()
    for table in key_tables():
        assert table in doc, table.splitlines()[0]


def test_the_docs_document_no_key_that_is_not_declared() -> None:
    rows = re.findall(r"^\| `(\w+)` \|", _every_key_section(), flags=re.MULTILINE)
    declared = [k.name for spec in SECTIONS for _, ks in keys_of(spec.cls) for k in ks]
    assert rows == declared


def test_every_field_of_every_section_is_a_declared_key() -> None:
    for spec in SECTIONS:
        fields = [f.name for f in dataclasses.fields(spec.cls)]
        assert fields == [name for name, _ in keys_of(spec.cls)], spec.name


def test_a_field_defaults_to_its_declared_default() -> None:
    for spec in SECTIONS:
        for field, declared in keys_of(spec.cls):
            (f,) = [f for f in dataclasses.fields(spec.cls) if f.name == field]
            if len(declared) == 1 and declared[0].default is not REQUIRED:
                assert f.default == declared[0].default, f"{spec.name}.{field}"
            else:
                assert f.default is dataclasses.MISSING, f"{spec.name}.{field}"


def test_section_checks_name_declared_sections() -> None:
    assert set(SECTION_CHECKS) <= {spec.name for spec in SECTIONS}


def test_the_summary_names_only_declared_budget_keys() -> None:
    budget = next(spec for spec in SECTIONS if spec.name == "budget")
    declared = {k.name for _, ks in keys_of(budget.cls) for k in ks}
    summary = "\n".join(describe_config(Config(
        github=GitHubConfig(app_id=1, private_key=Secret("k"), webhook_secrets=(Secret("s"),)),
        triggers=TriggersConfig(),
        budget=BudgetConfig(enabled=True, session_tokens=88000, weekly_tokens=1500000,
                            max_run_tokens=30000, per_actor_pct=50, monthly_usd=100.0))))
    named = set(re.findall(r"\b([a-z]+(?:_[a-z]+)+)\b", summary))
    budget_named = {n for n in named if n.endswith(("_tokens", "_pct", "_usd", "_pr"))}
    assert {"session_tokens", "weekly_tokens", "max_run_tokens"} <= budget_named
    assert budget_named <= declared, budget_named - declared


def test_both_config_files_are_declared_one_way_and_read_in_one_place() -> None:
    """The repository's file is declared with ``declare.key`` like the operator's; the
    reader's typed reads are called from ``read_key`` alone (and a secret's file name)."""
    from service.config.repository.keys import KEYS, RepoSettings

    declared = [name for name, _ in keys_of(RepoSettings)]
    assert declared == [f.name for f in dataclasses.fields(RepoSettings)
                        if f.name != "fail_on_set"]
    assert [k.name for k in KEYS][-2:] == ["checks.fail_on", "language"]
    assert all(k.inherits and k.example is not None for k in KEYS)
    typed = re.compile(r"\.(integer|boolean|string|strings|optional_string)\(")
    readers = sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "service" / "config").rglob("*.py")
        if path.name != "reader.py" and typed.search(path.read_text()))
    assert readers == ["service/config/read_key.py", "service/config/secrets.py"]
