"""The README's two commands and the newcomer's documents say what the code does.

The README's first command must run ``serve`` as the CLI parses it, on a config that does
not exist yet (registration creates it); its second must be the command CI runs. Every
relative link in the README and in the onboarding, security and development documents
must point at a file (and heading) that exists.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from service.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", "docs/ONBOARDING.md", "docs/SECURITY.md", "docs/DEVELOPMENT.md",
        "docs/ARCHITECTURE.md", "docs/CONFIG.md"]


def commands(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)\n```$", text, re.MULTILINE | re.DOTALL)


def test_the_first_command_installs_and_serves_a_config_registration_will_create() -> None:
    first, _ = commands((ROOT / "README.md").read_text())
    *install, serve = first.split(" && ")
    assert install == ["python3 -m venv .venv", ".venv/bin/pip install -r requirements.lock",
                       ".venv/bin/pip install --no-deps -e ."]
    argv = shlex.split(serve)
    assert argv[0] == ".venv/bin/pr-review-agent"
    args = build_parser().parse_args(argv[1:])
    assert args.command == "serve" and args.config == "config.yaml"
    assert args.public_url.startswith("https://")


def test_the_second_command_is_what_ci_runs() -> None:
    _, tests = commands((ROOT / "README.md").read_text())
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci
    # The runtime dependencies come from the lock, as the image installs them.
    assert tests.index("pip install -r requirements.lock") < tests.index("pip install -e")


def anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc: str) -> None:
    path = ROOT / doc
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links, doc
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue
        target, _, fragment = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        assert file.exists(), f"{doc}: {link}"
        if fragment and file.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", file.read_text(), re.MULTILINE)
            assert fragment in {anchor(h) for h in headings}, f"{doc}: {link}"
