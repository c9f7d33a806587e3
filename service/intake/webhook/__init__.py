"""Webhook intake, beside the poller: the route (``receiver``), batching deliveries into
one transaction (``group_commit``), recording and applying them (``deliveries``), and
installation changes (``installations``). ``service.intake.ingest`` is the seam both share."""
