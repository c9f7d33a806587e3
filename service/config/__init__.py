"""Typed, strict configuration.

The schema is a tree of frozen dataclasses (``schema.py``), each key declared once on
its field with its kind, default, bounds and doc (``declare.py``). ``load_config(path,
environ)`` reads a YAML file (``strict_yaml.py``) and the environment (both passed in, so
tests and reloads need no globals) and returns a ``Config`` or raises ``ConfigError``
listing *every* problem found, each prefixed by its key path; ``parse_config``
(``validate.py``) does the same for an in-memory document. ``describe_config``
(``describe.py``) is the summary ``check-config`` prints, and renders docs/CONFIG.md's key
tables from the same declarations.
"""

from service.config.checks import DEFAULT_USD_PER_MILLION_TOKENS, public_url_problem
from service.config.describe import describe_config, key_tables
from service.config.errors import ConfigError, MissingCredentials
from service.config.schema import (
    ASSOCIATIONS,
    ENGINE_KINDS,
    ENGINE_RESPONSE_FORMATS,
    ENV_PRIVATE_KEY,
    ENV_WEBHOOK_SECRET,
    ENV_WEBHOOK_SECRET_PREVIOUS,
    SECTIONS,
    BudgetConfig,
    ChecksConfig,
    Config,
    EngineConfig,
    GitHubConfig,
    PollerConfig,
    PublishConfig,
    RepositoryConfigConfig,
    RetentionConfig,
    ReviewConfig,
    ServerConfig,
    StoreConfig,
    TriggersConfig,
    WorkersConfig,
)
from service.config.strict_yaml import load_config, with_port
from service.config.validate import parse_config

__all__ = [
    "ASSOCIATIONS",
    "DEFAULT_USD_PER_MILLION_TOKENS",
    "ENGINE_KINDS",
    "ENGINE_RESPONSE_FORMATS",
    "ENV_PRIVATE_KEY",
    "ENV_WEBHOOK_SECRET",
    "ENV_WEBHOOK_SECRET_PREVIOUS",
    "SECTIONS",
    "BudgetConfig",
    "ChecksConfig",
    "Config",
    "ConfigError",
    "EngineConfig",
    "GitHubConfig",
    "MissingCredentials",
    "PollerConfig",
    "PublishConfig",
    "RepositoryConfigConfig",
    "RetentionConfig",
    "ReviewConfig",
    "ServerConfig",
    "StoreConfig",
    "TriggersConfig",
    "WorkersConfig",
    "describe_config",
    "key_tables",
    "load_config",
    "parse_config",
    "public_url_problem",
    "with_port",
]
