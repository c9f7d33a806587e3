"""The JSON Schema published for editors is the declarations' own, and accepts the
documented example."""

from __future__ import annotations

import re

import yaml
from jsonschema import Draft202012Validator

from service.config.repository import json_schema
from service.config.repository.parse import parse_repository_file
from tests.config_documents import REPOSITORY_FILE as GOOD
from tests.kit.paths import CHECKOUT

ROOT = CHECKOUT
DOC = ROOT / "docs" / "REPOSITORY-CONFIG.md"



def test_the_published_schema_is_the_declarations_and_accepts_the_docs_example() -> None:
    assert (ROOT / "docs" / "pr-review-agent.schema.json").read_text() == json_schema.text()
    validator = Draft202012Validator(json_schema.schema())
    example = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert example is not None
    assert parse_repository_file(example.group(1)).ok
    assert list(validator.iter_errors(yaml.safe_load(example.group(1)))) == []
    assert list(validator.iter_errors(yaml.safe_load(GOOD))) == []
    assert list(validator.iter_errors({"min_severty": "nit"}))  # unknown keys refused
    assert list(validator.iter_errors({"checks": {"fail_on": "majr"}}))
