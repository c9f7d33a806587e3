"""The operator's commands beside ``serve``: ``doctor``, ``healthcheck``, ``queue …`` and
``runs …`` (``service.cli.main`` adds them to its parser). Each handler takes the parsed
arguments and the two output streams and returns the exit status."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from service.storage.database import Database

__all__ = ["add_operator_parsers"]


def _doctor(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from datetime import UTC, datetime

    from service.cli.doctor import doctor
    from service.cli.local_review import report_problems
    from service.config.errors import ConfigError, MissingCredentials
    from service.config.strict_yaml import load_config

    try:
        config = load_config(args.config, os.environ)
    except MissingCredentials:
        print(f"PROBLEM github: the App is not registered yet: run `pr-review-agent serve "
              f"--config {args.config}` once and follow the page it serves "
              "(docs/ONBOARDING.md)", file=out)
        return 1
    except ConfigError as exc:
        report_problems(args.config, exc, err)
        return 2
    return doctor(config, args.config, os.environ, clock=lambda: datetime.now(UTC), out=out)


def _healthcheck(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """GET /healthz of the server the config describes, from the same host: the container
    image's HEALTHCHECK, which must follow ``server.port``."""
    import urllib.error
    import urllib.request

    from service.config.connections import ServerConfig
    from service.config.errors import ConfigError, MissingCredentials
    from service.config.strict_yaml import load_config

    try:
        server = load_config(args.config, os.environ).server
    except MissingCredentials as exc:  # the registration page answers on the same port
        server = exc.config.server
    except (ConfigError, OSError) as exc:
        print(f"healthcheck: {args.config} does not load ({exc}); asking the default port",
              file=err)
        server = ServerConfig()
    host = "127.0.0.1" if server.host in ("", "0.0.0.0", "::") else server.host  # noqa: S104
    host = f"[{host}]" if ":" in host else host
    url = f"http://{host}:{args.port or server.port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as answer:
            status = json.loads(answer.read()).get("status", "?")
    except urllib.error.HTTPError as exc:
        print(f"{url}: {exc.code} {exc.reason}", file=out)
        return 1
    except (OSError, ValueError) as exc:
        print(f"{url}: {exc}", file=out)
        return 1
    print(f"{url}: {status}", file=out)
    return 0


@contextlib.contextmanager
def _store_of(args: argparse.Namespace, err: TextIO) -> Iterator[Database | None]:
    """The store the config at ``args.config`` names, closed afterwards; None (after
    printing the config's problems) when the config does not load."""
    from service.cli.local_review import load_or_report
    from service.storage.open import open_store

    config = load_or_report(args.config, err)
    if config is None:
        yield None
        return
    store = open_store(config.store)
    try:
        yield store
    finally:
        store.close()


def _queue(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from service.cli import queue_commands as q

    with _store_of(args, err) as store:
        if store is None:
            return 2
        action = args.queue_action
        if action == "list":
            return q.queue_list(store, statuses=args.status or (), repo=args.repo,
                                limit=args.limit, as_json=args.json, out=out)
        if action == "show":
            return q.queue_show(store, args.key, now=datetime.now(UTC), as_json=args.json,
                                out=out, err=err)
        if action == "retry":
            return q.queue_retry(store, args.key, out=out, err=err)
        return q.queue_cancel(store, args.key, out=out, err=err)


def _runs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from service.cli import queue_commands as q

    with _store_of(args, err) as store:
        if store is None:
            return 2
        if args.runs_action == "list":
            return q.runs_list(store, repo=args.repo, failed=args.failed, limit=args.limit,
                               as_json=args.json, out=out)
        return q.runs_republish(store, args.key, now=datetime.now(UTC), out=out, err=err)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_operator_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser], *,
                         port: Callable[[str], int]) -> None:
    """``doctor``, ``healthcheck``, ``queue …`` and ``runs …``."""
    from service.storage.queue import STATUSES

    doctor = sub.add_parser("doctor", help="find what would make the first review fail: "
                            "the engine, GitHub, the store, the webhook")
    doctor.add_argument("--config", required=True, help="path to the YAML config")
    doctor.set_defaults(handler=_doctor)

    health = sub.add_parser("healthcheck", help="GET /healthz of the server the config "
                            "describes (the container's HEALTHCHECK); exit 1 unless it answers "
                            "ok or degraded")
    health.add_argument("--config", required=True, help="path to the YAML config")
    health.add_argument("--port", type=port, help="the port serve was given with --port")
    health.add_argument("--timeout", type=float, default=4.0, help="seconds (default 4)")
    health.set_defaults(handler=_healthcheck)

    queue = sub.add_parser("queue", help="list, show, retry or cancel queue rows (safe while "
                           "serve runs)")
    actions = queue.add_subparsers(dest="queue_action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the newest rows, newest first")
    listing.add_argument("--status", action="append", choices=STATUSES,
                         help="only rows in this status (repeatable)")
    listing.add_argument("--repo", help="only this repository, owner/name")
    listing.add_argument("--limit", type=_positive, default=50, help="at most this many")
    show = actions.add_parser("show", help="one row, its cost and its run")
    retry = actions.add_parser("retry", help="an abandoned or cancelled row back to pending, "
                               "attempts reset")
    cancel = actions.add_parser("cancel", help="cancel a pending row")
    for action in (show, retry, cancel):
        action.add_argument("key", help="the row's dedupe key (queue list shows it)")
    for action in (listing, show, retry, cancel):
        action.add_argument("--config", required=True, help="path to the YAML config")
    for action in (listing, show):
        action.add_argument("--json", action="store_true", help="print JSON")
    queue.set_defaults(handler=_queue)

    runs = sub.add_parser("runs", help="list runs; publish a failed or dry-run run again")
    run_actions = runs.add_subparsers(dest="runs_action", required=True, metavar="ACTION")
    run_list = run_actions.add_parser("list", help="the newest runs, newest first")
    run_list.add_argument("--repo", help="only this repository, owner/name")
    run_list.add_argument("--failed", action="store_true",
                          help="only runs whose publication was given up on")
    run_list.add_argument("--limit", type=_positive, default=50, help="at most this many")
    run_list.add_argument("--json", action="store_true", help="print JSON")
    republish = run_actions.add_parser("republish", help="offer a failed or dry-run run to "
                                       "the publisher again (no second engine run)")
    republish.add_argument("key", help="the run's dedupe key (runs list shows it)")
    for action in (run_list, republish):
        action.add_argument("--config", required=True, help="path to the YAML config")
    runs.set_defaults(handler=_runs)
