"""The version in what a harness's version command printed (no Docker, no Django)."""

from __future__ import annotations

import re

_VERSION_RE = re.compile(r"\d+\.\d+(?:\.\d+)*(?:(?:a|b|rc|\.post|\.dev)\d+)*"
                         r"(?:[-+][0-9A-Za-z.]+)?")


def plain_version(text: str) -> str:
    """The version in what a harness's version command printed, as Harbor records it: the first
    version number on the last line that has one ("OpenHands version: 1.6.0" after a library's
    warning -> "1.6.0"; "2.1.332 (Claude Code)" -> "2.1.332"); the text itself if none."""
    for line in reversed((text or "").strip().splitlines()):
        found = _VERSION_RE.search(line)
        if found:
            return found.group(0)
    return (text or "").strip()
