"""``pr-review-agent doctor --config FILE``: what would make the first review fail, found
before it does.

Each check prints one line: ``ok``, ``info``, ``WARN`` or ``PROBLEM`` followed by what to
do. ``PROBLEM`` is only what will fail; what doctor cannot know from here (a credential the
engine's command may not need, an address a proxy may forward to) is a ``WARN`` that says
so. The checks, in the order a review needs them:

1. **engine** — for ``claude_code``: the command is found and ``--version`` answers (the
   version is printed); a credential variable of ``engine.credential_env`` is set; the
   engine runs confined (the isolation probe ``serve`` runs before its workers). For the
   HTTP engines: the API key variable is set.
2. **github** — GitHub answers at ``github.api_url``; the App's JWT is accepted
   (``GET /app``: its name); the installations and their repositories are listed; the
   repositories of ``github.repositories`` are among them.
3. **store** — it opens (and is migrated, as ``serve`` would) at this code's version.
4. **webhook** — the URL GitHub must deliver to, and how to test it.

Nothing here writes to GitHub. Exit 0 when no check found a problem (warnings included), 1
otherwise, 2 for a config that does not load.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal, TextIO
from urllib.parse import urlsplit

import httpx

from service.app.setup.manifest import public_url_for
from service.config.schema import Config
from service.github.client import GitHubClient
from service.github.errors import GitHubError

__all__ = ["Check", "check_command", "check_engine", "check_github", "check_store", "check_webhook",
           "check_windows", "doctor", "run_command"]

VERSION_TIMEOUT: Final = 20.0
SHOWN_REPOSITORIES: Final = 10

Status = Literal["ok", "info", "WARN", "PROBLEM"]


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    status: Status
    what: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<7} {self.what}: {self.detail}"


def _ok(what: str, detail: str) -> Check:
    return Check("ok", what, detail)


def _problem(what: str, detail: str) -> Check:
    return Check("PROBLEM", what, detail)


def _warn(what: str, detail: str) -> Check:
    return Check("WARN", what, detail)


# -- the engine -------------------------------------------------------------------------

Runner = Callable[[list[str], Mapping[str, str]], tuple[int, str, str]]


def run_command(argv: list[str], env: Mapping[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(argv, env=dict(env), capture_output=True, text=True,  # noqa: S603
                          timeout=VERSION_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
    return done.returncode, done.stdout, done.stderr


def check_engine(config: Config, config_path: str, environ: Mapping[str, str], *,
                 run: Runner = run_command) -> list[Check]:
    """The engine's command, version and credential, and its confinement."""
    engine = config.engine
    if engine.kind != "claude_code":
        name = engine.api_key_env or ("ANTHROPIC_API_KEY" if engine.kind == "anthropic"
                                      else None)
        found = [_ok("engine", f"{engine.kind} at {engine.api_url or 'its default URL'}")]
        if name is not None and not environ.get(name):
            found.append(_problem("engine credential", f"{name} is not set: export it in "
                                  "the service's environment (the deploy files read it from "
                                  "their env file)"))
        elif name is not None:
            found.append(_ok("engine credential", f"{name} is set"))
        return found
    found = check_command(engine.command, environ, run)
    names = engine.credential_env
    present = [n for n in names if environ.get(n)]
    if present:
        found.append(_ok("engine credential", f"{', '.join(present)} set"))
    else:
        # The real CLI needs one of these (it runs with a throwaway HOME, so a login
        # stored in ~/.claude is not seen); a stand-in command, or a wrapper that logs in
        # its own way, may not. Doctor cannot tell which it runs, so it says so.
        found.append(_warn(
            "engine credential", f"none of {', '.join(names)} is set. The Claude Code CLI "
            "needs one (else every review ends engine_unavailable): run `claude setup-token` "
            f"once and export the token as {names[0]} in the service's environment. Ignore "
            f"this if {engine.command!r} is a stand-in or logs in another way"))
    found.append(_isolation(config, config_path, environ))
    return found


async def check_windows(config: Config, environ: Mapping[str, str], *,
                        transport: httpx.AsyncBaseTransport | None = None) -> list[Check]:
    """Each model's context window and where it came from (``engine.windows``): what a
    large pull request is split by, and routed by (``engine.models``). Unknown is a
    warning: calls are then sized by the run's tokens alone, and a server's refusal is
    the first sign of the limit."""
    from service.review.routing import build_routes

    try:
        routes = build_routes(config.engine, environ, transport=transport)
    except ValueError as exc:
        return [_problem("engine window", str(exc))]
    found = []
    for route in routes:
        name = ("engine window" if len(routes) == 1
                else f"engine window ({route.model or 'the default model'})")
        sizing = await route.engine.sizing(config.budget.max_run_tokens)
        found.append((_warn if sizing.window.tokens is None else _ok)(
            name, sizing.window.describe()))
    return found


def check_command(command: str, environ: Mapping[str, str], run: Runner) -> list[Check]:
    words = shlex.split(command)
    where = shutil.which(words[0], path=environ.get("PATH")) if words else None
    if where is None:
        return [_problem("engine", f"{words[0] if words else command!r} is not on PATH: "
                         "install Claude Code (npm install -g @anthropic-ai/claude-code, or the "
                         "docker image, which pins it) or set engine.command")]
    env = {k: v for k, v in environ.items() if k in ("PATH", "HOME", "LANG")}
    try:
        code, out, err = run([where, *words[1:], "--version"], env)
    except (OSError, subprocess.SubprocessError) as exc:
        return [_problem("engine", f"{where} --version could not run ({exc}): check the "
                         "installation")]
    if code != 0 or not out.strip():
        said = (err or out).strip().splitlines()[:1]
        return [_problem("engine", f"{where} --version failed (exit {code}"
                         + (f": {said[0]}" if said else "") + "): reinstall Claude Code")]
    return [_ok("engine", f"{out.strip().splitlines()[0]} at {where}")]


def _isolation(config: Config, config_path: str, environ: Mapping[str, str]) -> Check:
    from service.app.runners import check_engine_isolation
    from service.engine.sandbox import SandboxError

    try:
        verified = check_engine_isolation(config, config_path, dict(environ))
    except SandboxError as exc:
        return _problem("engine isolation", str(exc))
    if verified is None:
        return Check("info", "engine isolation", "off (engine.isolation: none)")
    return _ok("engine isolation", verified.describe().removeprefix("engine isolation: "))


# -- GitHub -----------------------------------------------------------------------------

async def check_github(config: Config, *, clock: Callable[[], datetime],
                       transport: httpx.AsyncBaseTransport | None = None) -> list[Check]:
    """The App's JWT, its installations and their repositories (reads only)."""
    gh = config.github
    found: list[Check] = []
    async with GitHubClient.from_config(gh, clock=clock, transport=transport) as client:
        try:
            app = await client.get_json("app", "/app")
        except GitHubError as exc:
            return [_problem("github", _jwt_advice(exc, gh.app_id))]
        except httpx.HTTPError as exc:
            return [_problem("github", f"{gh.api_url} did not answer ({type(exc).__name__}: "
                             f"{exc}): check the network, a proxy, or github.api_url")]
        slug = str(app.get("slug", ""))
        found.append(_ok("github", f"the App {app.get('name')!r} ({slug}, id {gh.app_id}) "
                         f"accepted the JWT at {gh.api_url}"))
        installed: set[str] = set()
        count = 0
        async for inst in client.paginate("app", "/app/installations"):
            count += 1
            found.append(await _installation(client, inst, installed))
        if count == 0:
            found.append(_problem("installations", "the App is installed nowhere: install it "
                                  f"on a repository at https://github.com/apps/{slug}/"
                                  "installations/new (or your server's equivalent)"))
    missing = [r for r in gh.repositories if r.lower() not in installed]
    if missing and count:
        found.append(_problem("github.repositories", f"{', '.join(missing)} "
                              f"{'is' if len(missing) == 1 else 'are'} not in any installation: "
                              "add them to the App's installation, or remove them from the list"))
    return found


async def _installation(client: GitHubClient, inst: Mapping[str, object],
                        installed: set[str]) -> Check:
    ident = inst.get("id")
    account = inst.get("account")
    who = account.get("login") if isinstance(account, Mapping) else None
    what = f"installation {ident} ({who})"
    if not isinstance(ident, int):
        return _problem(what, "GitHub listed an installation without an id")
    if inst.get("suspended_at"):
        return _problem(what, "suspended: its owner must unsuspend it in the installation's "
                        "settings")
    try:
        names = [str(r.get("full_name")) async for r in client.paginate(
            ident, "/installation/repositories", items_key="repositories")]
    except GitHubError as exc:
        return _problem(what, f"its token or repositories could not be read ({exc}): check "
                        "the installation's permissions")
    installed.update(n.lower() for n in names)
    if not names:
        return _problem(what, "no repository is selected: add repositories in the "
                        "installation's settings")
    shown = ", ".join(names[:SHOWN_REPOSITORIES])
    more = f" and {len(names) - SHOWN_REPOSITORIES} more" if len(names) > SHOWN_REPOSITORIES \
        else ""
    return _ok(what, f"{len(names)} repositor{'y' if len(names) == 1 else 'ies'}: {shown}{more}")


def _jwt_advice(exc: GitHubError, app_id: int) -> str:
    if exc.status == 401:
        return (f"GitHub refused the App's JWT ({exc.message}): the private key is not one of "
                f"App {app_id}'s, or this host's clock is off by more than a minute — "
                "generate a new key in the App's settings and point github.private_key_file "
                "at it, or fix the clock (NTP)")
    if exc.status == 404:
        return f"GitHub knows no App {app_id}: check github.app_id ({exc.message})"
    return f"GET /app failed: {exc}"


# -- the store and the webhook ------------------------------------------------------------

def check_store(config: Config) -> Check:
    """The store opens (migrating as ``serve`` would) and is at this code's version."""
    from service.storage.errors import STORE_ERRORS, MigrationError
    from service.storage.open import open_store, store_label

    label = store_label(config.store)
    failures: tuple[type[Exception], ...] = (*STORE_ERRORS, OSError)
    try:
        store = open_store(config.store)
    except MigrationError as exc:
        return _problem("store", f"{label}: {exc}: run the version of pr-review-agent that "
                        "wrote it, or restore a backup")
    except failures as exc:
        return _problem("store", f"{label} cannot be opened ({type(exc).__name__}: {exc}): "
                        "check the path's directory and permissions, or the database URL, "
                        "its password file and that the server runs")
    try:
        version, head = store.version, store.head_version
    finally:
        store.close()
    return _ok("store", f"{label} at schema version {version}"
               + (" (this code's)" if version == head else f" (this code writes {head})"))


def check_webhook(config: Config, config_path: str) -> list[Check]:
    """Where GitHub must deliver, and how to see that it does."""
    server = config.server
    url = f"{public_url_for(server)}{server.webhook_path}"
    found = [Check("info", "webhook", f"GitHub must deliver to {url} (the App's settings → "
                   "Webhook URL). Test locally: pr-review-agent replay --config "
                   f"{config_path} --event ping PAYLOAD.json; on GitHub: the App's settings → "
                   "Advanced → Recent Deliveries → Redeliver, then look for `webhook "
                   "delivery` in the log")]
    loopback = ("127.0.0.1", "localhost", "::1")
    github_here = (urlsplit(config.github.api_url).hostname or "") in loopback
    if not server.public_url and server.host in loopback and not github_here:
        # A reverse proxy or a tunnel on this host may forward to it: not known to fail.
        found.append(_warn("webhook", f"server.host is {server.host}: GitHub reaches it only "
                           "through a reverse proxy or tunnel on this host. If there is one, "
                           "set server.public_url to its address; if not, listen on 0.0.0.0"))
    return found


# -- the command ----------------------------------------------------------------------------

def doctor(config: Config, config_path: str, environ: Mapping[str, str], *,
           clock: Callable[[], datetime], out: TextIO,
           transport: httpx.AsyncBaseTransport | None = None, run: Runner = run_command) -> int:
    """Run every check, print one line each, and return the exit status."""
    checks: list[Check] = []

    def report(more: list[Check]) -> None:
        for check in more:
            print(check.line(), file=out, flush=True)
        checks.extend(more)

    report(check_engine(config, config_path, environ, run=run))
    report(asyncio.run(check_windows(config, environ, transport=transport)))
    report(asyncio.run(check_github(config, clock=clock, transport=transport)))
    report([check_store(config)])
    report(check_webhook(config, config_path))
    problems = sum(1 for c in checks if c.status == "PROBLEM")
    warnings = sum(1 for c in checks if c.status == "WARN")
    said = f"{problems} problem(s) found" if problems else "no problems found"
    print(said + (f", {warnings} warning(s)" if warnings else ""), file=out)
    return 1 if problems else 0
