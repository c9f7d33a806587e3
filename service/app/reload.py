"""Re-reading the config file in place (what SIGHUP does).

Only two things take effect without a restart: the ``budget`` section (the governor's
frozen ``BudgetConfig`` swapped in one assignment) and ``publish.dry_run``. A change
anywhere else is logged as needing a restart and *not* half-applied. A file that does not
parse or validate is logged at ERROR and the previous config stays in force: the brake
must never double as a way to take the service down with a typo.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from service.config.errors import ConfigError
from service.config.schema import Config
from service.config.strict_yaml import load_config

log = logging.getLogger(__name__)

#: Sections that may change under a running service, and how.
HOT_SECTIONS = ("budget",)
HOT_KEYS = (("publish", "dry_run"),)


@dataclass(frozen=True)
class Reloaded:
    """The config now in force, and what the reload did."""

    config: Config
    applied: tuple[str, ...]          # e.g. ("budget", "publish.dry_run")
    needs_restart: tuple[str, ...]    # sections that changed but were not applied
    error: str | None = None          # set when the file was refused


def reload_config(
    path: str | os.PathLike[str], environ: Mapping[str, str], current: Config
) -> Reloaded:
    """Read ``path`` and return the config to run with from now on.

    The result keeps every section of ``current`` except the hot ones, which come from
    the file. Callers then install ``result.config`` (the governor's ``config`` is
    ``result.config.budget``).
    """
    try:
        fresh = load_config(path, environ)
    except ConfigError as exc:
        log.error("config reload refused; the previous config stays in force: %s",
                  "; ".join(exc.problems))
        return Reloaded(config=current, applied=(), needs_restart=(), error=str(exc))

    applied: list[str] = []
    merged = current
    if fresh.budget != current.budget:
        merged = dataclasses.replace(merged, budget=fresh.budget)
        applied.append("budget")
    for section, key in HOT_KEYS:
        new_value = getattr(getattr(fresh, section), key)
        if new_value != getattr(getattr(current, section), key):
            part = dataclasses.replace(getattr(merged, section), **{key: new_value})
            merged = dataclasses.replace(merged, **{section: part})
            applied.append(f"{section}.{key}")

    # Whatever still differs once the hot parts are taken is a restart's business.
    needs_restart = tuple(
        f.name for f in dataclasses.fields(Config)
        if getattr(merged, f.name) != getattr(fresh, f.name)
    )
    if needs_restart:
        log.warning("config changes need a restart and were not applied: %s",
                    ", ".join(needs_restart))
    if applied:
        log.info("config reloaded: %s", ", ".join(applied))
    return Reloaded(config=merged, applied=tuple(applied), needs_restart=needs_restart)
