"""End-to-end tests: the real ``serve`` process against the standalone GitHub simulator."""
