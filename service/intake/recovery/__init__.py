"""Recovering webhook deliveries that failed: GitHub's delivery log, read every minute
(docs/POLLER.md#the-delivery-log)."""
