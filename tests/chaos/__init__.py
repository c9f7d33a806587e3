"""Chaos with a loss accounting: the real ``serve`` killed with SIGKILL (see test_chaos.py)."""
