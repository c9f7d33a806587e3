"""pr-review-agent: a self-hosted AI pull-request reviewer that runs as a GitHub App."""

__version__ = "0.1.0"
