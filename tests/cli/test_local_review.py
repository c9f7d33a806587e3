"""``pr-review-agent review`` from the operator's shell: a config that does not load is
reported with every problem, not raised. (``review`` itself runs end to end in
tests/e2e/test_serve_operator.py.)"""

from __future__ import annotations

import io
from pathlib import Path

from service.cli.local_review import load_or_report


def test_a_config_that_does_not_load_is_reported_with_every_problem(tmp_path: Path) -> None:
    broken = tmp_path / "config.yaml"
    broken.write_text("github: {}\nbudget: {}\n")
    err = io.StringIO()
    assert load_or_report(str(broken), err) is None
    lines = err.getvalue().splitlines()
    assert lines[0].startswith(f"{broken}: ") and lines[0].endswith("problem(s)")
    assert any("github.app_id: required" in line for line in lines[1:])
    assert all(line.startswith("  ") for line in lines[1:])


