"""Prometheus metrics: the process's instruments (``Metrics``), the store's state
(``StoreState``) and the ``/metrics`` body (``render``). docs/OPERATIONS.md lists every
name."""

from .exposition import CONTENT_TYPE, MULTIPROC_ENV, render
from .instruments import PREFIX, Metrics, outcome_class
from .state import StoreState

__all__ = ["CONTENT_TYPE", "MULTIPROC_ENV", "PREFIX", "Metrics", "StoreState", "outcome_class",
           "render"]
