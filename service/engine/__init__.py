"""Review engines: one protocol (``base``), three implementations, the prompt and schema."""
