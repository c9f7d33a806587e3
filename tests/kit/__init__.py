"""Builders and helpers the tests share (one of each: a wait, ...)."""
