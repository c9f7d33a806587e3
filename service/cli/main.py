"""The ``pr-review-agent`` command line: one sub-command per operator task."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Final, TextIO

from service import __version__


def _check_repository_file(path: str, out: TextIO, err: TextIO) -> int:
    from service.config.repository.keys import FILE_PATH
    from service.config.repository.parse import parse_repository_file

    try:
        with open(path, "rb") as file:
            parsed = parse_repository_file(file.read())
    except OSError as exc:
        print(f"{path}: cannot be read ({exc.strerror or exc})", file=err)
        return 2
    if not parsed.ok:
        print(f"{path}: {len(parsed.problems)} problem(s); a repository with this "
              f"{FILE_PATH} is reviewed with the defaults until it is fixed", file=err)
        for problem in parsed.problems:
            print(f"  {problem}", file=err)
        return 2
    names = parsed.settings.names()
    print(f"{path}: OK", file=out)
    print(f"  sets: {', '.join(names) if names else 'nothing (every key at its default)'}",
          file=out)
    return 0


def _check_config(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from service.config.describe import describe_config
    from service.config.errors import ConfigError, MissingCredentials
    from service.config.strict_yaml import load_config

    if args.file is not None and args.config is not None and args.file != args.config:
        print("check-config: give the config once, as FILE or --config FILE", file=err)
        return 2
    args.file = args.file if args.file is not None else args.config
    if (args.file is None) == (args.repository_file is None):
        print("check-config: give a config FILE (or --config FILE), or --repository-file FILE",
              file=err)
        return 2
    if args.repository_file is not None:
        return _check_repository_file(args.repository_file, out, err)

    try:
        config = load_config(args.file, os.environ)
    except MissingCredentials as exc:  # valid but for the App: not an error list
        from service.app.setup.run import describe_pending

        for line in describe_pending(args.file, exc):
            print(line, file=out)
        return 3
    except ConfigError as exc:
        print(f"{args.file}: {len(exc.problems)} problem(s)", file=err)
        for problem in exc.problems:
            print(f"  {problem}", file=err)
        return 2
    from service.app.runners import check_engine_isolation
    from service.engine.sandbox import SandboxError

    try:
        verified = check_engine_isolation(config, args.file, os.environ)
    except SandboxError as exc:
        print(f"{args.file}: 1 problem(s)", file=err)
        print(f"  engine.isolation: {exc}", file=err)
        return 2
    print(f"{args.file}: OK", file=out)
    for line in describe_config(config):
        print(f"  {line}", file=out)
    if verified is not None:
        print(f"  {verified.describe()}", file=out)
    from service.engine.factory import engine_warnings

    warnings = engine_warnings(config.engine, os.environ)
    for warning in warnings:
        print(f"  warning: {warning}", file=out)
    if warnings:
        print(f"  the file is valid, but reviews would fail here: `pr-review-agent doctor "
              f"--config {args.file}` checks the engine, GitHub and the store for real",
              file=out)
    return 0


def _migrate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from service.config.errors import ConfigError
    from service.config.strict_yaml import load_config
    from service.storage.database import Database
    from service.storage.open import open_store, store_label
    from service.storage.sqlite import SqliteStore

    if args.source is not None or args.target is not None:
        return _copy(args, out, err)
    store: Database
    if args.store is not None:
        label, store = args.store, SqliteStore(args.store)
    else:
        try:
            config = load_config(args.config, os.environ).store
        except ConfigError as exc:
            for problem in exc.problems:
                print(f"{args.config}: {problem}", file=err)
            return 2
        label, store = store_label(config), open_store(config)
    try:
        print(f"{label}: schema version {store.version}", file=out)
    finally:
        store.close()
    return 0


def _without_password(url: str) -> str:
    """A URL fit to print: a password written into it is replaced by ``***``."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _copy(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from service.storage.copy import CopyError, copy_store
    from service.storage.errors import STORE_ERRORS
    from service.storage.postgres import PostgresStore
    from service.storage.sqlite import SqliteStore

    if args.source is None or args.target is None:
        print("migrate: --from STATE_DB and --to POSTGRESQL_URL go together", file=err)
        return 2
    if not os.path.isfile(args.source):
        print(f"migrate: {args.source}: no such SQLite store", file=err)
        return 2
    password = None
    if args.password_file is not None:
        try:
            with open(args.password_file, encoding="utf-8") as file:
                password = file.read().strip()
        except OSError as exc:
            print(f"migrate: --password-file: {exc.strerror}: {args.password_file}",
                  file=err)
            return 2
    try:
        with SqliteStore(args.source) as source, \
                PostgresStore(args.target, password=password) as target:
            copied = copy_store(source, target)
    except CopyError as exc:
        print(f"migrate: nothing copied: {exc}", file=err)
        return 1
    except STORE_ERRORS as exc:
        print(f"migrate: nothing copied: {type(exc).__name__}: {exc}", file=err)
        return 1
    for table, rows in copied.rows.items():
        print(f"  {table}: {rows} row(s)", file=out)
    print(f"{args.source} -> {_without_password(args.target)}: {copied.total} row(s) copied "
          "and verified", file=out)
    return 0


def _serve(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from service.app.daemon import RoleUnavailableError, check_role, serve
    from service.config.errors import ConfigError
    from service.config.strict_yaml import load_config, with_port
    from service.observe.logs import LOG_LEVELS, configure_logging

    try:
        check_role(args.role)
    except RoleUnavailableError as exc:
        print(f"serve: {exc}", file=err)
        return 2
    try:
        config = load_config(args.config, os.environ)
    except ConfigError as exc:
        if exc.registration_needed or not os.path.lexists(args.config):
            # First run: register the App from its manifest, then serve (service/app/setup/).
            from service.app.first_run import register_and_serve

            configure_logging(args.log_format, level=LOG_LEVELS[args.log_level], stream=err)
            return register_and_serve(args.config, args.role, public_url=args.public_url,
                                      environ=os.environ, err=err, port=args.port)
        print(f"{args.config}: {len(exc.problems)} problem(s)", file=err)
        for problem in exc.problems:
            print(f"  {problem}", file=err)
        return 2
    configure_logging(args.log_format, level=LOG_LEVELS[args.log_level], stream=err)
    return serve(with_port(config, args.port), args.role, environ=os.environ,
                 config_path=args.config)


def _budget(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import json
    from datetime import UTC, datetime

    from service.budget.governor import Governor
    from service.budget.report import render
    from service.config.errors import ConfigError
    from service.config.strict_yaml import load_config
    from service.storage.open import open_store

    try:
        config = load_config(args.config, os.environ)
    except ConfigError as exc:
        print(f"{args.config}: {len(exc.problems)} problem(s)", file=err)
        for problem in exc.problems:
            print(f"  {problem}", file=err)
        return 2
    store = open_store(config.store)
    try:
        # Looking must not publish: only --publish-policy writes the shared policy.
        governor = Governor(store, config.budget, publish=False)
        if args.reset_calibration:
            governor.reset_calibration()
            print("calibration reset: limits back to 100%, breaker closed", file=err)
        if args.publish_policy:
            governor.publish_policy()
            print(f"shared policy replaced with {args.config}'s budget "
                  f"(authority {governor.authority})", file=err)
        body = governor.snapshot(datetime.now(UTC)).as_json()
    finally:
        store.close()
    if args.json:
        print(json.dumps(body, indent=2), file=out)
    else:
        for line in render(body):
            print(line, file=out)
    return 0


def _review(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from service.cli.local_review import load_or_report, review
    from service.observe.logs import LOG_LEVELS, configure_logging

    config = load_or_report(args.config, err)
    if config is None:
        return 2
    configure_logging(args.log_format, level=LOG_LEVELS[args.log_level], stream=err)
    return review(config, args.repo, args.pr, dry_run=args.dry_run, out=out, err=err,
                  config_path=args.config)


def _replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from pathlib import Path

    from service.cli.local_review import load_or_report
    from service.cli.replay import replay

    config = load_or_report(args.config, err)
    if config is None:
        return 2
    return replay(config, args.event, Path(args.payload), url=args.url, out=out, err=err)


#: ``--log-level`` names (``service.observe.logs.LOG_LEVELS``), without importing logging set-up.
LOG_LEVEL_NAMES: Final = ("debug", "info", "warning", "error")


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be between 1 and 65535")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pr-review-agent",
        description="A self-hosted AI pull-request reviewer that runs as a GitHub App.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = sub.add_parser("check-config", help="validate a config file and print its limits")
    check.add_argument("file", nargs="?", help="path to the YAML config")
    check.add_argument("--config", help="the same, as every other command takes it")
    check.add_argument("--repository-file", metavar="FILE",
                       help="validate a repository's .github/pr-review-agent.yml instead")
    check.set_defaults(handler=_check_config)

    migrate = sub.add_parser("migrate", help="create or upgrade the store and print its version")
    where = migrate.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", help="path to the SQLite store file")
    where.add_argument("--config", help="path to the YAML config (uses its store)")
    where.add_argument("--from", dest="source", metavar="STATE_DB",
                       help="copy this SQLite store into the empty PostgreSQL database --to")
    migrate.add_argument("--to", dest="target", metavar="POSTGRESQL_URL",
                         help="with --from: the PostgreSQL database to copy into")
    migrate.add_argument("--password-file", metavar="FILE",
                         help="with --to: the PostgreSQL password (else libpq's PGPASSWORD "
                              "or ~/.pgpass)")
    migrate.set_defaults(handler=_migrate)

    serve = sub.add_parser("serve", help="run the service (web receiver, poller, workers)")
    serve.add_argument("--config", required=True, help="path to the YAML config")
    serve.add_argument("--role", choices=("web", "poller", "worker", "all"), default="all",
                       help="which components this process runs (default: all)")
    serve.add_argument("--log-format", choices=("json", "text"), default=None,
                       help="log lines as readable text or JSON objects (default: text at a "
                       "terminal, JSON otherwise)")
    serve.add_argument("--log-level", choices=tuple(LOG_LEVEL_NAMES), default="info",
                       help="the least severe lines written (default: info; debug adds "
                       "every GitHub request)")
    serve.add_argument("--port", type=_port, help="listen on this port instead of "
                       "server.port")
    serve.add_argument("--public-url", help="the URL GitHub reaches this server at, for "
                       "registering the App (default: server.public_url, else "
                       "http://HOST:PORT)")
    serve.set_defaults(handler=_serve)

    budget = sub.add_parser("budget", help="show the budget as GET /budget does; reset the "
                            "calibration or publish the shared policy")
    budget.add_argument("--config", required=True, help="path to the YAML config")
    budget.add_argument("--json", action="store_true",
                        help="print the GET /budget JSON instead of a table")
    budget.add_argument("--reset-calibration", action="store_true",
                        help="forget every usage-limit trip: limits back to 100%%, "
                        "breaker closed")
    budget.add_argument("--publish-policy", action="store_true",
                        help="replace the shared budget policy with this config's budget")
    budget.set_defaults(handler=_budget)

    review = sub.add_parser("review", help="review one pull request now, through the same "
                            "governor, ledger and publisher as serve")
    review.add_argument("--config", required=True, help="path to the YAML config")
    review.add_argument("--repo", required=True, help="the repository, owner/name")
    review.add_argument("--pr", required=True, type=int, help="the pull request number")
    review.add_argument("--dry-run", action="store_true",
                        help="record the review without posting anything to GitHub")
    review.add_argument("--log-format", choices=("json", "text"), default="text",
                        help="log lines as readable text (default) or JSON objects")
    review.add_argument("--log-level", choices=tuple(LOG_LEVEL_NAMES), default="info",
                        help="the least severe lines written (default: info)")
    review.set_defaults(handler=_review)

    replay = sub.add_parser("replay", help="sign a webhook payload and POST it to a running "
                            "server with GitHub's headers")
    replay.add_argument("--config", required=True,
                        help="path to the YAML config (its webhook secret signs)")
    replay.add_argument("--event", required=True, help="X-GitHub-Event, e.g. pull_request")
    replay.add_argument("payload", help="the payload, a JSON file")
    replay.add_argument("--url", help="where to POST (default: "
                        "http://127.0.0.1:{server.port}{server.webhook_path})")
    replay.set_defaults(handler=_replay)

    from service.cli.operator_commands import add_operator_parsers

    add_operator_parsers(sub, port=_port)
    return parser


Handler = Callable[[argparse.Namespace, TextIO, TextIO], int]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args, sys.stdout, sys.stderr)
    except BrokenPipeError:
        # The reader went away (`queue list | head`): stop quietly, as a Unix tool does.
        # Python's own recipe: point stdout at /dev/null so the flush at exit cannot
        # raise a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command the pipe ended
