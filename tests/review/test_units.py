"""The worker's pure parts: globs and layer 2, diff splitting, the estimator, the ack path,
the pull-request parser, git's environment; plus the git runner's timeout and the sweep."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from service.github.names import validate_branch, validate_repo
from service.github.pulls import parse_pull
from service.model.jobs import Job
from service.publish.acknowledge import reaction_path
from service.review.checkout import (
    Checkouts,
    GitError,
    GitRunner,
    auth_header,
    git_environment,
    token_config,
)
from service.review.diff import (
    DiffError,
    FileDiff,
    excluded_by,
    line_count,
    pair_files,
    parse_name_status,
    select,
    split_sections,
)
from service.review.engine_call import outcome_for
from service.review.estimate import DEFAULT_BASE_TOKENS, Estimator, fit, load_estimator
from service.storage.queue import Claim, Lease
from service.storage.sqlite import SqliteStore

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)



# -- globs and layer 2 ------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "pattern", "matches"), [
    ("yarn.lock", "*.lock", True),
    ("web/app/yarn.lock", "*.lock", True),
    ("lockfile", "*.lock", False),
    ("vendor/x.go", "**/vendor/**", True),
    ("a/b/vendor/c/d.go", "**/vendor/**", True),
    ("a/vendored/x.go", "**/vendor/**", False),
    ("docs/api.md", "docs/*.md", True),
    ("docs/deep/api.md", "docs/*.md", False),
    ("x/docs/api.md", "docs/*.md", False),
    ("docs/deep/api.md", "docs/**", True),
    ("src/gen_1.py", "src/gen_?.py", True),
    ("src/gen_12.py", "src/gen_?.py", False),
    ("img/a.png", "*.[pj]ng", True),
    ("img/a.jng", "*.[!p]ng", True),
    ("img/a.png", "*.[!p]ng", False),
    ("a+b(c).txt", "a+b(c).txt", True),
])
def test_globs(path: str, pattern: str, matches: bool) -> None:
    assert (excluded_by(path, [pattern]) == pattern) is matches


def test_a_blank_glob_is_refused() -> None:
    with pytest.raises(ValueError, match="glob"):
        excluded_by("x", ["/"])


def _file(path: str, lines: int, old: str | None = None) -> FileDiff:
    header = f"diff --git a/{old or path} b/{path}\n"
    return FileDiff(path, old, "R" if old else "M", header + "+x\n" * (lines - 1))


def test_select_withholds_excluded_then_keeps_whole_files_within_the_cap() -> None:
    files = [_file("a.py", 40), _file("big.py", 100), _file("yarn.lock", 5), _file("b.py", 60),
             _file("c.py", 10), _file("new/name.py", 3, old="vendor/old.py")]
    chosen = select(files, excluded=["*.lock", "vendor/**"], max_lines=100)
    assert chosen.paths == ("a.py", "b.py")
    assert chosen.lines == 100 and chosen.truncated
    assert [(o.path, o.reason, o.pattern) for o in chosen.omitted] == [
        ("big.py", "max_diff_lines", None), ("yarn.lock", "excluded", "*.lock"),
        ("c.py", "max_diff_lines", None), ("new/name.py", "excluded", "vendor/**")]
    assert chosen.diff == files[0].text + files[3].text
    assert not select(files[:1], excluded=[], max_lines=100).truncated
    with pytest.raises(ValueError, match="max_lines"):
        select(files, excluded=[], max_lines=0)


def test_line_count_splits_on_newlines_only() -> None:
    assert line_count("") == 0
    assert line_count("a\nb\n") == 2
    assert line_count("a\nb") == 2
    assert line_count("a\u2028b\rc\n") == 1


# -- splitting git's diff ----------------------------------------------------------------------


DIFF = (
    "diff --git a/x.sql b/x.sql\n--- a/x.sql\n+++ b/x.sql\n@@ -1,2 +1,1 @@\n"
    "--- diff --git looks like a header but is a removed line\n keep\n"
    "diff --git a/old.txt b/new.txt\nsimilarity index 90%\nrename from old.txt\n"
    "rename to new.txt\n"
    "diff --git a/img.png b/img.png\nBinary files a/img.png and b/img.png differ\n"
)


def test_the_diff_is_paired_with_git_s_file_list() -> None:
    names = parse_name_status("M\0x.sql\0R090\0old.txt\0new.txt\0M\0img.png\0")
    assert names == [("M", "x.sql", None), ("R", "new.txt", "old.txt"), ("M", "img.png", None)]
    files = pair_files(DIFF, names)
    assert [f.path for f in files] == ["x.sql", "new.txt", "img.png"]
    assert files[1].old_path == "old.txt"
    assert "".join(f.text for f in files) == DIFF
    assert [f.lines for f in files] == [6, 4, 2]


def test_a_disagreeing_file_list_is_an_error() -> None:
    with pytest.raises(DiffError, match="listed 1"):
        pair_files(DIFF, [("M", "x.sql", None)])
    with pytest.raises(DiffError, match="header"):
        split_sections("garbage\n" + DIFF)
    with pytest.raises(DiffError):
        parse_name_status("R100\0only-one\0")
    assert split_sections("") == []


# -- the estimator -----------------------------------------------------------------------------


def test_fit_recovers_a_line_and_keeps_defaults_until_it_can() -> None:
    exact = [(x, 12 * x + 3000) for x in range(50, 550, 50)]
    est = fit(exact)
    assert est.fitted and est.samples == 10
    assert est.per_line == pytest.approx(12.0) and est.base == pytest.approx(3000.0)
    assert est.tokens(1000) == 15_000
    assert not fit(exact[:9]).fitted  # too few rows: the defaults
    assert fit(exact[:9]).base == DEFAULT_BASE_TOKENS
    assert not fit([(100, 5000)] * 12).fitted  # one size: no slope to tell
    custom = Estimator(per_line=1.0, base=5.0)
    assert fit([], custom) is custom


def test_fit_never_goes_negative() -> None:
    falling = [(x, 10_000 - x) for x in range(100, 1100, 100)]
    est = fit(falling)
    assert est.per_line == 0.0 and est.base == pytest.approx(9450.0)
    steep = [(x, 20 * x - 500) for x in range(100, 1100, 100)]
    est = fit(steep)
    assert est.base == 0.0 and est.per_line > 0
    with pytest.raises(ValueError, match="negative"):
        Estimator(per_line=-1.0)
    with pytest.raises(ValueError, match="lines"):
        Estimator().tokens(-1)


def test_load_estimator_fits_this_engine_s_completed_exact_runs(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "state.db") as store:
        rows: list[tuple[Any, ...]] = []
        for i in range(12):
            lines = 100 * (i + 1)
            rows.append((f"k{i}", "claude_code", "completed", "exact", lines, 8 * lines + 1000))
        rows += [  # none of these may enter the fit
            ("t", "claude_code", "truncated", "exact", 50, 90_000),
            ("u", "claude_code", "completed", "unavailable", 50, 90_000),
            ("o", "anthropic", "completed", "exact", 50, 90_000),
            ("n", "claude_code", "completed", "exact", None, 90_000),
        ]
        with store.transaction() as conn:
            for key, engine, reason, confidence, lines, used in rows:
                conn.execute(
                    "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
                    " used_tokens, usage_confidence, engine, reserved_at, settled_at,"
                    " reviewed_lines, stop_reason) VALUES (?, 'o', 1, 'full', 60000, ?, ?, ?,"
                    " '2026-05-01T09:00:00.000000+00:00', '2026-05-01T09:05:00.000000+00:00',"
                    " ?, ?)", (key, used, confidence, engine, lines, reason))
        with store.read() as conn:
            est = load_estimator(conn, "claude_code")
            other = load_estimator(conn, "openai_compatible")
    assert est.samples == 12
    assert est.per_line == pytest.approx(8.0) and est.base == pytest.approx(1000.0)
    assert not other.fitted


# -- small pieces ------------------------------------------------------------------------------


def test_outcomes() -> None:
    assert outcome_for("completed", False) == "completed"
    assert outcome_for("completed", True) == "truncated"
    assert outcome_for("truncated", False) == "truncated"
    for reason in ("timeout", "engine_error", "engine_unavailable", "usage_limit", "failed"):
        assert outcome_for(reason, False) == "failed"


def _claim(**fields: Any) -> Claim:
    base: dict[str, Any] = {
        "kind": "mention", "repo": "o/r", "pr_number": 7, "head_sha": None,
        "actor_id": 1, "comment_id": 55, "comment_source": "issue", "command": "review"}
    base.update(fields)
    return Claim(job=Job(**base),
                 lease=Lease(owner="h:1:0", until=T0, attempt=1))


def test_the_ack_goes_on_the_comment_or_the_pull_request() -> None:
    assert reaction_path(_claim()) == "/repos/o/r/issues/comments/55/reactions"
    assert reaction_path(_claim(comment_source="review")) == (
        "/repos/o/r/pulls/comments/55/reactions")
    assert reaction_path(_claim(kind="pr_opened", comment_id=None, comment_source=None,
                                head_sha="a" * 40)) == "/repos/o/r/issues/7/reactions"
    with pytest.raises(ValueError, match="repository"):
        reaction_path(_claim(repo="../x"))


def _pull(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "number": 7, "state": "open", "draft": False, "title": "T", "body": None,
        "created_at": "2026-03-01T12:00:00Z", "updated_at": "2026-03-01T12:30:00Z",
        "merged": False, "user": {"id": 11},
        "head": {"sha": "b" * 40, "ref": "feature"},
        "base": {"sha": "a" * 40, "ref": "main",
                 "repo": {"clone_url": "https://github.com/o/r.git"}}}
    data.update(over)
    return data


def test_parse_pull() -> None:
    pull = parse_pull(_pull())
    assert (pull.open, pull.merged, pull.body, pull.author_id) == (True, False, "", 11)
    assert pull.clone_url == "https://github.com/o/r.git" and pull.base_ref == "main"
    closed = parse_pull(_pull(state="closed", merged=True))
    assert not closed.open and closed.merged
    with pytest.raises(ValueError, match=r"head\.sha"):
        parse_pull(_pull(head={"sha": 5}))
    with pytest.raises(ValueError, match="branch"):
        parse_pull(_pull(base={"sha": "a" * 40, "ref": "x:refs/heads/y",
                               "repo": {"clone_url": "u"}}))
    with pytest.raises(ValueError, match="sha"):
        parse_pull(_pull(head={"sha": "HEAD"}))
    with pytest.raises(ValueError, match="object"):
        parse_pull([])


def test_names_that_become_paths_or_refspecs_are_checked() -> None:
    assert validate_repo("acme/widgets.js") == ("acme", "widgets.js")
    for bad in ("acme", "acme/..", "../x", "a/b/c", "acme/wid gets"):
        with pytest.raises(ValueError):
            validate_repo(bad)
    assert validate_branch("release/1.2") == "release/1.2"
    for bad in ("-x", "a..b", "a b", "a:b", "x.lock", "/a"):
        with pytest.raises(ValueError):
            validate_branch(bad)


def test_the_token_is_scoped_to_the_remote_s_origin(monkeypatch: pytest.MonkeyPatch) -> None:
    env = token_config("https://github.example.com/o/r.git", "tok")
    assert env["GIT_CONFIG_KEY_0"] == "http.https://github.example.com/.extraheader"
    assert env["GIT_CONFIG_VALUE_0"] == auth_header("tok")
    assert auth_header("tok") == "Authorization: Basic eC1hY2Nlc3MtdG9rZW46dG9r"
    assert token_config("file:///srv/r.git", "tok")["GIT_CONFIG_KEY_0"] == "http.extraheader"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-not-for-git")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    env = git_environment()
    assert "ANTHROPIC_API_KEY" not in env and env["HTTPS_PROXY"] == "http://proxy:3128"
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_TERMINAL_PROMPT"] == "0"


# -- git runner and sweep ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_git_that_hangs_is_killed_with_its_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = tmp_path / "slow-git"
    script.write_text(f"#!/bin/sh\nsleep 30 &\necho $! > '{pidfile}'\nwait\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(GitError, match=r"no answer within 0\.3 s") as caught:
        await GitRunner(executable=str(script), timeout=0.3)(["fetch"])
    assert caught.value.returncode is None
    child = int(pidfile.read_text())
    # The grandchild went with the group (reaped by init, or a zombie at worst).
    state = subprocess.run(["ps", "-o", "stat=", "-p", str(child)], capture_output=True,
                           text=True, check=False).stdout.strip()
    assert state in ("", "Z")


@pytest.mark.anyio
async def test_git_errors_carry_git_s_words_without_the_secret(tmp_path: Path) -> None:
    script = tmp_path / "bad-git"
    script.write_text("#!/bin/sh\necho 'fatal: could not read from tok123' >&2\nexit 128\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(GitError) as caught:
        await GitRunner(executable=str(script))(["fetch"], secret="tok123")
    assert caught.value.returncode == 128
    assert "tok123" not in str(caught.value) and "could not read from ***" in str(caught.value)


def test_sweep_removes_worktrees_of_dead_processes_only(tmp_path: Path) -> None:
    checkouts = Checkouts(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for name in (f"{dead}-aaaa", f"{os.getpid()}-bbbb", "1-cccc", "junk"):
        (checkouts.worktrees / name).mkdir(parents=True)
        (checkouts.worktrees / name / "f.txt").write_text("x")
    removed = checkouts.sweep()
    assert [p.name for p in removed] == [f"{dead}-aaaa"]
    assert sorted(p.name for p in checkouts.worktrees.iterdir()) == [
        "1-cccc", f"{os.getpid()}-bbbb", "junk"]

