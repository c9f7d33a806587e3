"""``GET /metrics``: the process's instruments and the store's state in Prometheus' text
format.

One process: its own registry. Several processes on one host (``serve --role web`` beside
``--role worker``): every process is started with ``PROMETHEUS_MULTIPROC_DIR`` naming one
shared, empty directory — ``prometheus_client``'s multiprocess mode, which makes each
process write its counters there — and the web process adds them up. Several hosts: each
host's web process is scraped and Prometheus sums the counters; the state series are the
same from every host (``service.observe.metrics.state``).
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from .instruments import Metrics

__all__ = ["CONTENT_TYPE", "MULTIPROC_ENV", "render"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def render(metrics: Metrics, state: Collector | None, environ: Mapping[str, str]) -> bytes:
    """The scrape's body: this process's figures (or every process's, in multiprocess
    mode), then ``state``'s."""
    shared = environ.get(MULTIPROC_ENV)
    own = metrics.registry
    if shared:
        own = CollectorRegistry()
        MultiProcessCollector(own, path=shared)  # type: ignore[no-untyped-call]
    body = generate_latest(own)
    if state is not None:  # the text format allows families one after another
        read = CollectorRegistry(auto_describe=False)
        read.register(state)
        body += generate_latest(read)
    return body
