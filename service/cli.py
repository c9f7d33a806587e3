"""The ``pr-review-agent`` command line: one sub-command per operator task."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from service import __version__


def _check_config(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from service.config import ConfigError, describe_config, load_config

    try:
        config = load_config(args.file, os.environ)
    except ConfigError as exc:
        print(f"{args.file}: {len(exc.problems)} problem(s)", file=err)
        for problem in exc.problems:
            print(f"  {problem}", file=err)
        return 2
    print(f"{args.file}: OK", file=out)
    for line in describe_config(config):
        print(f"  {line}", file=out)
    return 0


def _migrate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from service.config import ConfigError, load_config
    from service.store import SqliteStore

    path = args.store
    if path is None:
        try:
            path = load_config(args.config, os.environ).store.path
        except ConfigError as exc:
            for problem in exc.problems:
                print(f"{args.config}: {problem}", file=err)
            return 2
    store = SqliteStore(path)
    try:
        print(f"{path}: schema version {store.version}", file=out)
    finally:
        store.close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pr-review-agent",
        description="A self-hosted AI pull-request reviewer that runs as a GitHub App.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = sub.add_parser("check-config", help="validate a config file and print its limits")
    check.add_argument("file", help="path to the YAML config")
    check.set_defaults(handler=_check_config)

    migrate = sub.add_parser("migrate", help="create or upgrade the store and print its version")
    where = migrate.add_mutually_exclusive_group(required=True)
    where.add_argument("--store", help="path to the SQLite store file")
    where.add_argument("--config", help="path to the YAML config (uses store.path)")
    migrate.set_defaults(handler=_migrate)

    return parser


Handler = Callable[[argparse.Namespace, TextIO, TextIO], int]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    return handler(args, sys.stdout, sys.stderr)
