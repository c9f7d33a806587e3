"""First run: ``serve`` without App credentials registers the App, then serves.

What ``pr-review-agent serve`` calls when the config is missing or holds no App yet
(``MissingCredentials``): it writes a config from the template when there is none, serves
the registration page (``service.app.setup``) until GitHub hands back the App's credentials,
then starts the full service in the same process (``service.app.daemon.serve``). It sits
beside ``service.cli.main``, above the composition root, so that nothing below imports it.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from service.app.daemon import check_role, serve
from service.app.services import Clock, utc_now
from service.app.serving import listen
from service.app.setup.files import (
    new_config_text,
    writable_problem,
    write_admin_token,
    write_config,
)
from service.app.setup.manifest import public_url_for
from service.app.setup.registrar import Registered
from service.app.setup.run import register
from service.config.checks import public_url_problem
from service.config.errors import ConfigError, MissingCredentials
from service.config.strict_yaml import load_config, with_port

__all__ = ["register_and_serve"]

log = logging.getLogger(__name__)


def register_and_serve(config_path: str, role: str, *, public_url: str | None,
                       environ: Mapping[str, str], err: TextIO,
                       clock: Clock = utc_now, port: int | None = None) -> int:
    """``serve`` on a config without App credentials: register, then serve. Exit code.
    ``port`` (``serve --port``) replaces ``server.port``."""
    path = Path(config_path)
    if "web" not in check_role(role):
        print(f"serve: the GitHub App is not registered yet, and role {role!r} serves no web "
              "page to register it from: run `serve --role all` (or web) once first.",
              file=err)
        return 2
    if public_url is not None and (problem := public_url_problem(public_url)) is not None:
        print(f"serve: --public-url {problem}", file=err)
        return 2
    if not path.exists():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            problem = writable_problem(path)
            if problem is None:
                admin_token = write_admin_token(path)
                write_config(path, new_config_text(
                    path, clock(), public_url=None if public_url is None
                    else public_url.rstrip("/")))
        except OSError as exc:
            problem = f"cannot create {path}: {exc.strerror or type(exc).__name__}"
        if problem is not None:
            print(f"serve: {path} does not exist and cannot be created: {problem}", file=err)
            return 2
        print(f"Created {path} from the template. Review its budget section before the "
              "agent spends anything that matters (docs/BUDGET.md).", file=err)
        print(f"The admin token for /status, /budget and /metrics is in {admin_token} "
              "(the status page takes it as the password, any user name).", file=err)
    try:
        config = with_port(load_config(path, environ), port)
    except MissingCredentials as exc:
        pending = exc
        pending.config = with_port(pending.config, port)
    except ConfigError as exc:
        print(f"{path}: {len(exc.problems)} problem(s)", file=err)
        for line in exc.problems:
            print(f"  {line}", file=err)
        return 2
    else:  # credentials arrived by the environment meanwhile: nothing to register
        return serve(config, role, clock=clock, environ=environ, config_path=config_path)
    problem = writable_problem(path)
    if problem is not None:
        print(f"serve: the GitHub App is not registered yet, and registration cannot save its "
              f"credentials: {problem}. Register where the config is writable, or give "
              "github.app_id and the key and webhook secret files (docs/ONBOARDING.md).",
              file=err)
        return 2
    try:
        url = public_url_for(pending.config.server, public_url)
    except ValueError as exc:
        print(f"serve: {exc}", file=err)
        return 2
    try:
        registered = _run_registration(path, pending, public_url=url, environ=environ,
                                       err=err, clock=clock)
    except OSError as exc:
        log.error("cannot listen", extra={"host": pending.config.server.host,
                                          "port": pending.config.server.port,
                                          "error": str(exc)})
        return 1
    if registered is None:
        return 0
    log.info("registration complete; starting the service",
             extra={"app_id": registered.app_id, "install_url": registered.install_url})
    print(f"\nRegistered the GitHub App {registered.slug} (id {registered.app_id}). Install it "
          f"on your repositories: {registered.install_url}\n", file=err, flush=True)
    return serve(with_port(registered.config, port), role, clock=clock, environ=environ,
                 config_path=config_path)


def _run_registration(path: Path, pending: MissingCredentials, *, public_url: str,
                      environ: Mapping[str, str], err: TextIO,
                      clock: Clock) -> Registered | None:
    server = pending.config.server

    async def main() -> Registered | None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        sock = listen(server.host, server.port)  # OSError: the caller says why
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, stop.set)
        # SIGHUP's default would end the process; there is no config in force to reload.
        loop.add_signal_handler(signal.SIGHUP, lambda: log.warning(
            "SIGHUP ignored: the App is not registered yet, there is nothing to reload"))
        try:
            return await register(path, pending, public_url=public_url, environ=environ,
                                  stop=stop, sockets=[sock], err=err, clock=clock)
        finally:
            sock.close()
            for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(number)

    return asyncio.run(main())
