"""Prometheus metrics: the process's instruments (``Metrics``), the store's state
(``StoreState``) and the ``/metrics`` body (``render``). docs/OPERATIONS.md lists every
name."""
