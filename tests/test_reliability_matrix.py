"""Every row of the reliability and security matrix (docs/reliability-matrix.yaml) is named by a
test: its id appears in a test function's name (``test_r13_...``) or in its docstring (``R13:``).
A row without a test fails this module, as a paper figure without a check fails
tests/leaderboard/test_paper_facts.py."""

import ast
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MATRIX = ROOT / "docs" / "reliability-matrix.yaml"
TESTS = ROOT / "tests"


def matrix_rows() -> list[dict]:
    return yaml.safe_load(MATRIX.read_text())


def named_ids(tests_dir: Path = TESTS) -> dict[str, list[str]]:
    """Row id -> the tests (file::function) that name it."""
    found: dict[str, list[str]] = {}
    word = re.compile(r"\b([UJASRV]\d{1,2})\b")
    for path in sorted(tests_dir.rglob("test_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if not node.name.startswith("test_"):
                continue
            ids = {m.upper() for m in re.findall(r"(?:^|_)([ujasrv]\d{1,2})(?=_|$)", node.name)}
            ids |= set(word.findall(ast.get_docstring(node) or ""))
            for row_id in ids:
                found.setdefault(row_id, []).append(
                    f"{path.relative_to(tests_dir).as_posix()}::{node.name}")
    return found


def test_the_matrix_has_its_75_rows():
    rows = matrix_rows()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == 75
    counts = {k: sum(1 for i in ids if i[0] == k) for k in "UJASRV"}
    assert counts == {"U": 12, "J": 5, "A": 14, "S": 15, "R": 21, "V": 8}
    assert all(r["fault"] and r["expected"] for r in rows)


# Rows not built yet, each with the reason. A row listed here must have no test (the list only
# shrinks), and docs/reliability.md says the same.
NOT_BUILT: dict[str, str] = {}


def test_every_matrix_row_is_named_by_a_test():
    named = named_ids()
    missing = [r["id"] for r in matrix_rows() if r["id"] not in named and r["id"] not in NOT_BUILT]
    assert missing == [], f"matrix rows named by no test name or docstring: {missing}"
    assert [i for i in NOT_BUILT if i in named] == [], "a built row is still listed as not built"
    assert all(len(reason) > 40 for reason in NOT_BUILT.values())


def test_the_scan_sees_names_and_docstrings_only(tmp_path):
    """An id in a test's name or docstring counts; one in a comment, in a module docstring or in
    a helper's docstring does not."""
    (tmp_path / "test_x.py").write_text(
        '"""R96: module docstring"""\n'
        "def test_r99_name():\n    pass\n"
        "def test_doc():\n    \"\"\"R98 and A12: docstring\"\"\"\n    # R97: a comment\n"
        "def helper():\n    \"\"\"R95\"\"\"\n")
    assert named_ids(tmp_path) == {"R99": ["test_x.py::test_r99_name"],
                                   "R98": ["test_x.py::test_doc"], "A12": ["test_x.py::test_doc"]}
