"""Where the checkout is, for tests that read its files (docs, deploy/, the manifest)."""

from pathlib import Path

#: The repository's root: the directory holding service/, tests/ and docs/.
CHECKOUT = Path(__file__).resolve().parents[2]
