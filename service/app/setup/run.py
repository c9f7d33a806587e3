"""The registration step of a first run, and what ``check-config`` says of a file waiting
for it.

``register`` serves the registration page (``page.py``) on the sockets the first run
(``service.app.first_run``) listens on, until the App is registered (its ``Registered``)
or the process is asked to stop, and prints the page's one-time link. The first run then
closes the page and starts the full service in the same process. ``describe_pending`` is
``check-config``'s account of a file whose one remaining step is registration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

import httpx
import uvicorn

from service.app.services import Clock, utc_now
from service.app.setup.page import create_setup_app
from service.app.setup.registrar import Registered, Registrar
from service.config.describe import describe_config
from service.config.errors import MissingCredentials

__all__ = ["describe_pending", "register"]

log = logging.getLogger(__name__)


def describe_pending(path: str, exc: MissingCredentials) -> list[str]:
    """What ``check-config`` prints for a file whose one remaining step is registration."""
    return [
        f"{path}: registration is the one step left",
        "  The rest of the file is valid; the GitHub App is not registered yet (no app_id, "
        "private key or webhook secret).",
        f"  Register it: pr-review-agent serve --config {path} --public-url URL",
        "  and open the link it prints (docs/ONBOARDING.md).",
        *(f"  {line}" for line in describe_config(exc.config)),
    ]


async def register(config_path: Path, pending: MissingCredentials, *, public_url: str,
                   environ: Mapping[str, str], stop: asyncio.Event, sockets: list[socket.socket],
                   err: TextIO, clock: Clock = utc_now,
                   transport: httpx.AsyncBaseTransport | None = None) -> Registered | None:
    """Serve the registration page on ``sockets`` until the App is registered (its
    ``Registered``) or ``stop`` is set (None, even if registration completed meanwhile:
    the credentials are saved, and the next start serves them)."""
    registrar = Registrar(config_path, pending.config, public_url=public_url,
                          environ=environ, clock=clock, transport=transport)
    setup_key = secrets.token_urlsafe(24)
    done = asyncio.Event()
    app = create_setup_app(registrar, setup_key=setup_key,
                           webhook_path=pending.config.server.webhook_path,
                           on_registered=lambda _registered: done.set())
    # uvicorn takes SIGINT/SIGTERM while it serves and raises them again once stopped;
    # the caller's loop handlers have seen them already (they set ``stop``).
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_config=None,
                                           access_log=False, server_header=False,
                                           timeout_graceful_shutdown=5))
    # The link is written to stderr as it is, not through logging: log lines are shipped
    # and indexed. Under systemd or Docker stderr is kept too, which is why the key works
    # for this process only.
    print("\nThe GitHub App is not registered yet. To register it, open this link "
          "(it works for this process only):\n"
          f"  {public_url}/?key={setup_key}\n"
          f"GitHub will deliver webhooks to {registrar.webhook_url}; GitHub's pages are at "
          f"{registrar.web_url}.\n", file=err, flush=True)
    log.info("serving the registration page", extra={
        "public_url": public_url, "config": str(config_path), "github": registrar.web_url})

    async def stopper() -> None:
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(done.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        server.should_exit = True

    watcher = asyncio.ensure_future(stopper())
    try:
        await server.serve(sockets=sockets)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    if stop.is_set():  # asked to stop: the next start serves what was registered, if any
        return None
    return registrar.registered
