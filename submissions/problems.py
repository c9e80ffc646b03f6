"""The one problem type of upload validation: archive, metadata, Harbor layout, intake."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One validation problem; ``path`` names the file or trial directory (tree-relative)."""

    code: str
    path: str
    message: str

    def as_dict(self) -> dict:
        return {"code": self.code, "path": self.path, "message": self.message}
