"""Checkouts: one bare git cache per repository, one worktree per run.

``Checkouts(root)`` keeps ``root/repos/<owner>/<name>.git`` (bare, reused across runs, so
a fetch only transfers what is new) and ``root/worktrees/<pid>-<hex>`` (one per run,
removed when the run's ``async with`` block ends, whatever happened in it).

**The installation token is given to git alone.** A fetch passes it as an
``Authorization`` header through git's own environment (``GIT_CONFIG_COUNT`` /
``GIT_CONFIG_KEY_0`` / ``GIT_CONFIG_VALUE_0`` = ``http.<origin>/.extraheader``), scoped to
the remote's origin. It is never in a URL, in argv, in a file (the fetch names the URL
on the command line and writes no remote or ``FETCH_HEAD``), in a log line or in an
error message; no other git command, and no engine, is given it.

Every git command runs with a minimal environment (PATH, HOME, locale, proxy and CA
settings) and without the system and global git configs, so an operator's credential
helpers, ``url.insteadOf`` rules or hooks cannot interfere, and in its own process group,
killed whole on a timeout. Worktrees are checked out with ``core.symlinks=false``: a
pull request's symbolic link becomes a small text file, so the engine, reading the
worktree, cannot be pointed at a file outside it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import secrets
import shutil
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import anyio

from service.github.names import validate_repo, validate_sha
from service.runtime.pids import alive

log = logging.getLogger(__name__)

DEFAULT_GIT_TIMEOUT: Final = 600.0
_STDERR_TAIL: Final = 400
# What git may see of the service's environment: enough to find itself, reach a proxy and
# trust a private CA. Everything else (engine keys, the webhook secret's variable) stays out.
_PASS_THROUGH: Final = (
    "PATH", "HOME", "TMPDIR", "SYSTEMROOT",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH",
)
_ISOLATION: Final = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "LC_ALL": "C",
    "LANG": "C",
}


class GitError(RuntimeError):
    """A git command failed. The message names the subcommand and git's last words."""

    def __init__(self, subcommand: str, returncode: int | None, stderr: str) -> None:
        self.subcommand = subcommand
        self.returncode = returncode
        self.stderr = stderr
        status = "timed out" if returncode is None else f"exited {returncode}"
        super().__init__(f"git {subcommand} {status}: {stderr}".rstrip(": "))


def auth_header(token: str) -> str:
    """The ``Authorization`` header git sends for an installation token (HTTP Basic)."""
    pair = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return f"Authorization: Basic {pair}"


def token_config(url: str, token: str) -> dict[str, str]:
    """git config entries, as environment, that send ``token`` to ``url``'s origin only."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and parts.netloc:
        key = f"http.{parts.scheme}://{parts.netloc}/.extraheader"
    else:  # file:// and other local remotes never send it; the key stays unscoped
        key = "http.extraheader"
    return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": key,
            "GIT_CONFIG_VALUE_0": auth_header(token)}


def git_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every git command runs with (see the module docstring)."""
    env = {k: os.environ[k] for k in _PASS_THROUGH if k in os.environ}
    env.update(_ISOLATION)
    env.update(extra or {})
    return env


def _scrub(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "***").replace(auth_header(secret), "***")
    return text


@dataclass(frozen=True)
class GitRunner:
    """Runs ``git`` as a subprocess: ``await runner(args, git_dir=...)`` returns stdout."""

    executable: str = "git"
    timeout: float = DEFAULT_GIT_TIMEOUT

    async def __call__(
        self,
        args: Sequence[str],
        *,
        git_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
        secret: str | None = None,
        timeout: float | None = None,
    ) -> bytes:
        """Run git; GitError (its stderr scrubbed of ``secret``) when it fails."""
        argv = [self.executable]
        if git_dir is not None:
            argv.append(f"--git-dir={git_dir}")
        argv.extend(args)
        subcommand = args[0] if args else ""
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=git_environment(env), start_new_session=True,
        )
        limit = timeout or self.timeout
        try:
            with anyio.fail_after(limit):
                out, err = await proc.communicate()
        except TimeoutError:
            await _kill(proc)
            raise GitError(subcommand, None, f"no answer within {limit:g} s") from None
        except BaseException:
            await _kill(proc)  # cancelled: git (and its remote helpers) must not outlive us
            raise
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip()[-_STDERR_TAIL:]
            raise GitError(subcommand, proc.returncode, _scrub(tail, secret))
        return out


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """Kill the process group (start_new_session made the pid its id) and reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with anyio.CancelScope(shield=True):
        await proc.wait()


@dataclass(frozen=True)
class BareRepo:
    """One repository's bare cache and the read-only questions the worker asks it."""

    path: Path
    git: GitRunner

    async def run(self, *args: str) -> bytes:
        return await self.git(args, git_dir=self.path)

    async def has_commit(self, sha: str) -> bool:
        try:
            await self.run("cat-file", "-e", f"{validate_sha(sha)}^{{commit}}")
        except GitError:
            return False
        return True

    async def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """True when ``ancestor`` is in ``descendant``'s history (both must exist)."""
        try:
            await self.run("merge-base", "--is-ancestor", validate_sha(ancestor),
                           validate_sha(descendant))
        except GitError as exc:
            if exc.returncode == 1:
                return False
            raise
        return True

    async def resolve(self, ref: str) -> str:
        """The commit ``ref`` points at (GitError when there is no such ref)."""
        out = await self.run("rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}")
        return validate_sha(out.decode().strip())

    async def show(self, sha: str, path: str) -> str | None:
        """The text of the regular file ``path`` at ``sha``, read from git's objects.

        None when there is no such file, and for a symbolic link or a submodule: a
        link's blob is only a path, and what it points at must never be read, so
        nothing outside the commit can reach a prompt through a guidelines file.
        """
        try:
            listing = await self.run("ls-tree", "-z", "--full-tree", validate_sha(sha),
                                     "--", path)
        except GitError:
            return None
        entry = listing.split(b"\0", 1)[0]
        meta, _, listed = entry.partition(b"\t")
        fields = meta.split()
        if len(fields) != 3 or listed.decode("utf-8", "replace") != path:
            return None
        mode, kind, obj = fields
        if kind != b"blob" or mode not in (b"100644", b"100755"):
            return None
        try:
            data = await self.run("cat-file", "blob", obj.decode())
        except GitError:
            return None
        return data.decode("utf-8", "replace")


class Checkouts:
    """The bare caches and the worktrees under ``root``."""

    def __init__(self, root: Path, *, git: GitRunner | None = None) -> None:
        self.root = Path(root)
        self.git = git or GitRunner()
        self._locks: dict[str, asyncio.Lock] = {}

    def cache_dir(self, repo: str) -> Path:
        owner, name = validate_repo(repo)
        return self.root / "repos" / owner / f"{name}.git"

    @property
    def worktrees(self) -> Path:
        return self.root / "worktrees"

    def _lock(self, repo: str) -> asyncio.Lock:
        # Fetches and worktree changes write the bare repository's refs and its
        # worktrees/ metadata; one at a time per repository within this process.
        return self._locks.setdefault(repo, asyncio.Lock())

    async def fetch(self, repo: str, url: str, refspecs: Sequence[str], *,
                    token: str | None) -> BareRepo:
        """Bring ``refspecs`` from ``url`` into the repository's bare cache."""
        path = self.cache_dir(repo)
        bare = BareRepo(path, self.git)
        async with self._lock(repo):
            if not (path / "HEAD").exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                await self.git(["init", "--bare", "--quiet", str(path)])
            env = token_config(url, token) if token else None
            await self.git(
                ["fetch", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
                 "--quiet", "--force", url, *refspecs],
                git_dir=path, env=env, secret=token)
        return bare

    @contextlib.asynccontextmanager
    async def worktree(self, bare: BareRepo, sha: str, *, repo: str) -> AsyncIterator[Path]:
        """A detached worktree of ``bare`` at ``sha``, removed when the block ends."""
        validate_sha(sha)
        self.worktrees.mkdir(parents=True, exist_ok=True)
        path = self.worktrees / f"{os.getpid()}-{secrets.token_hex(6)}"
        symlinks_off = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.symlinks",
                        "GIT_CONFIG_VALUE_0": "false"}
        async with self._lock(repo):
            await self.git(["worktree", "add", "--detach", "--quiet", str(path), sha],
                           git_dir=bare.path, env=symlinks_off)
        try:
            yield path
        finally:
            with anyio.CancelScope(shield=True):
                await self._remove(bare, path, repo)

    async def _remove(self, bare: BareRepo, path: Path, repo: str) -> None:
        async with self._lock(repo):
            try:
                await self.git(["worktree", "remove", "--force", "--force", str(path)],
                               git_dir=bare.path)
            except GitError as exc:
                log.warning("git worktree remove failed; deleting the directory",
                            extra={"repo": repo, "error": str(exc)})
            if path.exists():
                shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(GitError):
                await self.git(["worktree", "prune"], git_dir=bare.path)

    def sweep(self) -> list[Path]:
        """Delete worktrees left by processes that no longer run (a crash); returns them.

        A directory is named after its process id, so worktrees of other live processes
        sharing this data directory are left alone. The bare caches forget them at their
        next ``worktree prune``.
        """
        removed: list[Path] = []
        if not self.worktrees.is_dir():
            return removed
        for entry in self.worktrees.iterdir():
            pid_text = entry.name.split("-", 1)[0]
            if not pid_text.isdigit() or alive(int(pid_text)):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
        if removed:
            log.warning("removed worktrees left by a process that died",
                        extra={"count": len(removed)})
        return removed

