"""The vocabulary every layer shares and none owns: a job and its dedupe keys, a
finding's severity and fingerprint, the ETag cache's contract, and invisible characters.
Pure, and importing nothing else of the service."""
