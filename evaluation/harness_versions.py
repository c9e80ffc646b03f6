"""The version in what a harness's version command printed, and when two versions are the same
(no Docker, no Django)."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

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


def same_version(a: str, b: str) -> bool:
    """Whether two recorded harness versions name exactly the same release: "codex-cli 0.130.0"
    is 0.130.0, but 2.0.0 is neither 2.0.0rc1 nor 2.0 (the site runs one exact build, and
    packaging's own == pads 2.0 to 2.0.0). Text that is no version is compared as written."""
    plain_a, plain_b = plain_version(a), plain_version(b)
    try:
        va, vb = Version(plain_a), Version(plain_b)
    except InvalidVersion:
        return plain_a == plain_b
    return va == vb and len(va.release) == len(vb.release)
