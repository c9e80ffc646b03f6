"""The project's one SHA-256 file helper (streamed in 1 MiB blocks; memory stays bounded)."""

from __future__ import annotations

import hashlib
from pathlib import Path

BLOCK = 1 << 20


def update_from_file(h, path: Path | str) -> None:
    """Feed the bytes of the file at `path` into the hash object `h`."""
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(BLOCK), b""):
            h.update(block)


def sha256_file(path: Path | str) -> str:
    """Hex SHA-256 of the file at `path`."""
    h = hashlib.sha256()
    update_from_file(h, path)
    return h.hexdigest()
