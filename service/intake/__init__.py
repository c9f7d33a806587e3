"""How work comes in: the webhook route's receiver and its deliveries and installations
(``webhook``), the trigger rules that turn an event into a decision (``rules``), the
poller that finds what a webhook missed (``poller``), and the one seam both use to write
decisions (``ingest``)."""
