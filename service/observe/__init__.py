"""What an operator sees of a running service: health (``/healthz``), structured logs and
Prometheus metrics."""
