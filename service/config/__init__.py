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
