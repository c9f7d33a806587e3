"""Shared fixtures. Keep this small: module-specific fixtures live beside their tests."""
