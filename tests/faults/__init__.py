"""Fault injection: GitHub, the engine and the store misbehaving under the whole daemon."""
