"""What a config that cannot be used raises."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.config.schema import Config

__all__ = ["ConfigError", "MissingCredentials"]


class ConfigError(Exception):
    """Every problem found in one config file, each prefixed by its key path.

    ``registration_needed`` is True only on ``MissingCredentials``: callers test the flag
    to tell "register the App" from a file that needs fixing.
    """

    registration_needed: bool = False

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class MissingCredentials(ConfigError):
    """The file is valid except that the GitHub App is not registered yet.

    Raised when the only problems are the App's missing credentials: no ``github``
    section, or one without ``app_id`` whose private key and webhook secret are neither
    in the environment nor in files that exist yet. ``problems`` are the usual messages;
    ``config`` is everything else the file says, parsed and valid, with a placeholder
    ``github`` (``app_id`` 0, no secrets) that keeps only ``api_url`` and
    ``repositories``: what registration needs to know (service/app/setup/).
    """

    registration_needed = True

    def __init__(self, problems: list[str], config: Config) -> None:
        super().__init__(problems)
        self.config = config
