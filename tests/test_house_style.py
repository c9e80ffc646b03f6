"""The house style lives in the repository (docs/house-style.md, house style HS42) and every
citation of one of its rules names a rule that exists there.

Rules are defined as ``- **HS<n> (MUST)**`` list items; code, docs and tests cite them as ``HS14``
or a range ``HS21-HS24``. A citation of a missing id fails, and so does a citation in the old
form, "house style R14" or "house style section 5", whose ``R`` numbers read as reliability
matrix rows (docs/reliability-matrix.yaml). ARCHITECTURE.md and the house style link only to
files inside the repository. No database, no Docker: the tracked files are read as text.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOUSE_STYLE = REPO / "docs" / "house-style.md"

RULE = re.compile(r"^- \*\*(HS\d+[a-z]?) \((?:MUST|SHOULD|MUST NOT)\)\*\*", re.M)
# "HS14", "HS5b", and ranges "HS21-HS24" / "HS21–HS24" (every id in between must exist too).
CITATION = re.compile(r"\bHS(\d+)([a-z]?)(?:\s*[-–]\s*HS(\d+)\b)?(?![\w])")
# The house style cited by something other than an HS id: a matrix-like R id or a section.
OLD_FORM = re.compile(
    r"house[ -]style,?\s+(?:rules?\s+)?(?:R\d+|sections?\s+\d|§\s*\d)", re.IGNORECASE)
# Not ours (vendored, locked, generated data) or not text.
SKIP_PREFIXES = ("static/vendor/",)
SKIP_NAMES = ("uv.lock", "package-lock.json")
SKIP_SUFFIXES = (".json", ".csv", ".png", ".tif", ".jpg", ".gz")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def defined_rules(text: str) -> list[str]:
    return RULE.findall(text)


def cited_rules(text: str) -> list[str]:
    """Every rule id a text cites, ranges expanded (HS21-HS24 is HS21, HS22, HS23, HS24)."""
    out = []
    for m in CITATION.finditer(text):
        first, suffix, last = m.group(1), m.group(2), m.group(3)
        if last is None:
            out.append(f"HS{first}{suffix}")
        else:
            out += [f"HS{n}" for n in range(int(first), int(last) + 1)]
    return out


def problems(text: str, rules: set[str]) -> list[str]:
    found = [f"cites {rid}, which docs/house-style.md does not define"
             for rid in cited_rules(text) if rid not in rules]
    found += [f"cites the house style in the old form: {m.group(0)!r} (use its HS id)"
              for m in OLD_FORM.finditer(text)]
    return found


def file_problems(text: str, rules: set[str]) -> list[tuple[int, str]]:
    """problems() line by line; an old-form citation split over two lines of prose or of a
    comment ("house style" / "# R14") is found at the line where it starts."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        following = lines[i + 1].strip().lstrip("#*/-").strip() if i + 1 < len(lines) else ""
        joined = f"{line} {following}"
        found += [(i + 1, p) for p in problems(line, rules) if "old form" not in p]
        found += [(i + 1, f"cites the house style in the old form: {m.group(0)!r} (use its HS id)")
                  for m in OLD_FORM.finditer(joined) if m.start() < len(line)]
    return found


def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    files = []
    for name in filter(None, names):
        if name.startswith(SKIP_PREFIXES) or Path(name).name in SKIP_NAMES:
            continue
        if name.endswith(SKIP_SUFFIXES) or name.startswith("requirements-"):
            continue
        path = REPO / name
        if path.is_file():
            files.append(path)
    return files


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def test_every_rule_has_one_unique_hs_id():
    rules = defined_rules(HOUSE_STYLE.read_text(encoding="utf-8"))
    assert len(rules) == len(set(rules)), sorted(r for r in rules if rules.count(r) > 1)
    assert "HS1" in rules and "HS14" in rules and "HS42" in rules, rules
    # Never a reliability matrix letter followed by a number: that is what the ids replace.
    assert not re.search(r"\*\*[RSAUJ]\d+", HOUSE_STYLE.read_text(encoding="utf-8"))


def test_every_house_style_citation_in_the_repository_names_a_rule_that_exists():
    rules = set(defined_rules(HOUSE_STYLE.read_text(encoding="utf-8")))
    bad = []
    for path in tracked_text_files():
        text = _read(path)
        if text is None or path == Path(__file__).resolve():
            continue
        rel = path.relative_to(REPO)
        bad += [f"{rel}:{lineno}: {p}" for lineno, p in file_problems(text, rules)]
    assert not bad, "\n".join(bad)


def test_the_check_catches_a_missing_id_an_old_form_and_a_broken_range():
    rules = {"HS1", "HS5b", "HS14", "HS21", "HS22", "HS24"}
    assert problems("# Imported in the body (HS14); see HS5b and HS1.", rules) == []
    assert problems("matrix R14 is the load test, R3 the broker window", rules) == []
    assert problems("(HS99)", rules) == ["cites HS99, which docs/house-style.md does not define"]
    assert problems("lives in this package (HS21-HS24).", rules) == [
        "cites HS23, which docs/house-style.md does not define"]
    assert len(problems("as house style R14 prescribes", rules)) == 1
    assert len(problems("Pipeline (house style sections 5-6):", rules)) == 1
    assert len(problems("(House-style §5)", rules)) == 1
    assert file_problems("as house style\n# HS14 says", rules) == []
    assert [n for n, _p in file_problems("x\nas house style\n# R14 says", rules)] == [2]


def test_architecture_and_the_house_style_link_only_inside_the_repository():
    for doc in (REPO / "ARCHITECTURE.md", HOUSE_STYLE):
        text = doc.read_text(encoding="utf-8")
        assert "://" not in text, doc
        for target in MARKDOWN_LINK.findall(text):
            resolved = (doc.parent / target.split("#")[0]).resolve()
            assert resolved.is_relative_to(REPO) and resolved.exists(), (doc.name, target)
    assert "](docs/house-style.md)" in (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
