"""Real git repositories on disk for simulated pull requests.

``GitRepo.create(tmp_path / "widgets.git")`` makes a bare repository; ``commit`` writes a
commit from a mapping of paths to contents (``None`` deletes) without a work tree, using
a throw-away index. Branches and GitHub's ``refs/pull/<n>/head`` are plain refs, so the
code under test can clone it with ``git clone file:///…/widgets.git`` (the repository's
``clone_url`` in REST payloads is that ``file://`` URL) and fetch ``pull/<n>/head``.

``open_pull`` and ``push_to_pull`` tie it to a ``World``: they move the refs, compute the
diff GitHub would show (``git diff --full-index -M base...head``) and record the PR. Any
PR whose diff the world computes from a ``git_dir`` gets its ``refs/pull/<n>/head``.

The simulator does not serve git's smart-HTTP protocol; ``file://`` is the supported
remote, and tokens are not checked on clone.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import PullRequest, Revision
    from .state import World

# Fixed identity and dates make commits reproducible; no user or system config leaks in.
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Simulated Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Simulated Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.invalid",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}


def run_git(git_dir: Path, *args: str, input: bytes | None = None,
            env: Mapping[str, str] | None = None) -> str:
    """Run ``git --git-dir=<git_dir> args…``; raises with git's stderr on failure."""
    full_env = {**os.environ, **_GIT_ENV, **(env or {})}
    result = subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], input=input, capture_output=True,
        env=full_env, check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {result.stderr.decode(errors='replace')}")
    return result.stdout.decode()


def diff_between(git_dir: Path, base: str, head: str) -> str:
    """The pull request diff GitHub shows: changes on ``head`` since the merge base."""
    return run_git(git_dir, "diff", "--full-index", "--no-color", "--no-ext-diff", "-M",
                   f"{base}...{head}")


def set_pull_ref(git_dir: Path, number: int, sha: str) -> None:
    """Point GitHub's ``refs/pull/<number>/head`` at ``sha``."""
    run_git(git_dir, "update-ref", f"refs/pull/{number}/head", sha)


def commit_count(git_dir: Path, base: str, head: str) -> int:
    return int(run_git(git_dir, "rev-list", "--count", f"{base}..{head}").strip() or 0)


@dataclass
class GitRepo:
    """A bare repository plus helpers to write commits and refs."""

    path: Path

    @classmethod
    def create(cls, path: Path, *, default_branch: str = "main") -> GitRepo:
        path.mkdir(parents=True, exist_ok=True)
        run_git(path, "init", "--bare", "--quiet", f"--initial-branch={default_branch}")
        return cls(path)

    @property
    def url(self) -> str:
        """A ``file://`` URL usable as a clone remote."""
        return self.path.resolve().as_uri()

    def commit(self, files: Mapping[str, str | bytes | None], *, parent: str | None = None,
               message: str = "change", branch: str | None = None,
               timestamp: int = 1_700_000_000) -> str:
        """A commit of ``parent``'s tree with ``files`` applied; returns its sha.

        ``branch`` (if given) is moved to the new commit.
        """
        index = self.path / f"sim-index-{os.getpid()}-{secrets.token_hex(4)}"
        env = {"GIT_INDEX_FILE": str(index),
               "GIT_AUTHOR_DATE": f"{timestamp} +0000",
               "GIT_COMMITTER_DATE": f"{timestamp} +0000"}
        try:
            if parent is not None:
                run_git(self.path, "read-tree", parent, env=env)
            else:
                run_git(self.path, "read-tree", "--empty", env=env)
            for name, content in files.items():
                if content is None:
                    run_git(self.path, "update-index", "--force-remove", "--", name, env=env)
                    continue
                data = content.encode() if isinstance(content, str) else content
                blob = run_git(self.path, "hash-object", "-w", "--stdin", input=data).strip()
                run_git(self.path, "update-index", "--add", "--cacheinfo",
                        f"100644,{blob},{name}", env=env)
            tree = run_git(self.path, "write-tree", env=env).strip()
        finally:
            index.unlink(missing_ok=True)
        parents = ["-p", parent] if parent is not None else []
        sha = run_git(self.path, "commit-tree", tree, *parents, "-m", message, env=env).strip()
        if branch is not None:
            self.set_ref(f"refs/heads/{branch}", sha)
        return sha

    def set_ref(self, ref: str, sha: str) -> None:
        run_git(self.path, "update-ref", ref, sha)

    def ref(self, ref: str) -> str:
        return run_git(self.path, "rev-parse", "--verify", ref).strip()

    def diff(self, base: str, head: str) -> str:
        return diff_between(self.path, base, head)

    def show(self, sha: str, path: str) -> str:
        return run_git(self.path, "show", f"{sha}:{path}")


def open_pull(world: World, repo: str, git: GitRepo, *, base_ref: str, head_ref: str,
              title: str, user: str, number: int | None = None, body: str | None = "",
              draft: bool = False, emit: bool = True) -> PullRequest:
    """Open a PR from existing branches of ``git`` (the world repository's ``git_dir``)."""
    target = world.repo(repo)
    if target.git_dir is None:
        target.git_dir = git.path
    base_sha, head_sha = git.ref(f"refs/heads/{base_ref}"), git.ref(f"refs/heads/{head_ref}")
    return world.add_pull(repo, title=title, user=user, number=number, body=body,
                          head_sha=head_sha, base_sha=base_sha, diff=None, head_ref=head_ref,
                          base_ref=base_ref, draft=draft, emit=emit)


def push_to_pull(world: World, repo: str, number: int, git: GitRepo,
                 files: Mapping[str, str | bytes | None], *, force: bool = False,
                 message: str = "more changes", sender: str | None = None) -> Revision:
    """Commit ``files`` to the PR's head branch and emit ``synchronize``.

    ``force=True`` rewrites the branch: the new commit's parent is the base, as after a
    rebase-and-force-push, so the old head is no longer reachable from the branch.
    """
    pr = world.pull(repo, number)
    parent = pr.head.base_sha if force else pr.head.head_sha
    stamp = int(world.now().timestamp())
    sha = git.commit(files, parent=parent, message=message, branch=pr.head_ref, timestamp=stamp)
    return world.push(repo, number, head_sha=sha, sender=sender)
