"""Grader versions (R11): every category's grader has a VERSION, the committed source digest of
that version matches the source, and the grader's command line reports its version beside the
reward, so the site records which version produced each score."""

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

from evaluation import grader_versions, graders

REPO = Path(__file__).resolve().parents[2]


def test_r11_every_grader_has_a_version_whose_committed_digest_matches_its_source():
    """R11: a grader's source (its grader.py, the shared evaluation/grading.py and the command
    line; the judge and its prompt for judged categories) cannot change while its VERSION stays: bump VERSION and add the new digest to
    evaluation/grader_versions.json (the printed line), then re-score (`manage.py rescore`)."""
    committed = grader_versions.committed_digests()
    assert set(committed) == set(graders.CATEGORIES) == set(graders.VERSIONS)
    for category in graders.CATEGORIES:
        version = graders.VERSIONS[category]
        assert isinstance(version, int) and version >= 1, category
        digest = grader_versions.source_digest(category)
        assert committed[category].get(str(version)) == digest, (
            f"{category}: its grader source changed but VERSION is still {version}. Bump VERSION "
            f"in {grader_versions.source_files(category)[0]} and commit "
            f'"{version + 1}": "<new digest>" in evaluation/grader_versions.json '
            f"(current digest {digest})")
        # Versions only go up: the current one is the newest committed.
        assert version == max(int(v) for v in committed[category]), category
        assert graders.version_label(category) == f"{category}@{version}"


def test_r11_a_grader_edit_without_a_version_bump_changes_the_digest(tmp_path, monkeypatch):
    """R11: the digest covers the text that decides grades: editing a grader's pass rule in a
    copy of the evaluation package moves its digest (and only its category's), and editing the
    shared kit moves every digest, so the check above fails until the versions are bumped."""
    from evaluation.categories import CATEGORIES as registry

    copy = tmp_path / "evaluation"
    shutil.copytree(grader_versions.EVALUATION_DIR, copy,
                    ignore=shutil.ignore_patterns("__pycache__", "migrations"))
    for slug, category in registry.items():
        moved = copy / category.path.resolve().relative_to(grader_versions.EVALUATION_DIR)
        monkeypatch.setitem(registry, slug, dataclasses.replace(category, path=moved))
    monkeypatch.setattr(grader_versions, "EVALUATION_DIR", copy)
    before = {c: grader_versions.source_digest(c) for c in graders.CATEGORIES}
    module = copy / "categories" / "ct_abnormality_classification" / "grader.py"
    text = module.read_text()
    assert "passed=correct == total" in text
    module.write_text(text.replace("passed=correct == total", "passed=correct >= total - 1"))
    after = {c: grader_versions.source_digest(c) for c in graders.CATEGORIES}
    changed = sorted(c for c in before if before[c] != after[c])
    assert changed == ["ct-abnormality-classification"]
    (copy / "grading.py").write_text((copy / "grading.py").read_text() + "\n# shared change\n")
    shared = {c: grader_versions.source_digest(c) for c in graders.CATEGORIES}
    assert all(shared[c] != after[c] for c in graders.CATEGORIES)


def test_r11_the_grader_cli_writes_its_version_beside_the_reward(tmp_path):
    """R11: `python3 -m evaluation.graders ... --reward-file F` also writes grader.json beside F
    with the category's version (the verifier container's report the site records), whether the
    attempt passes or its input is refused."""
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"labels": {"nodule": "yes", "effusion": "no"}}))
    sub = tmp_path / "submission.json"
    sub.write_text(json.dumps({"labels": {"nodule": "yes", "effusion": "no"}}))
    reward = tmp_path / "verifier" / "reward.json"
    args = [sys.executable, "-m", "evaluation.graders", "ct-abnormality-classification",
            "--answer", str(answer), "--submission", str(sub), "--reward-file", str(reward)]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(reward.read_text())["reward"] == 1
    version = graders.VERSIONS["ct-abnormality-classification"]
    report = json.loads((reward.parent / "grader.json").read_text())
    assert report == {"category": "ct-abnormality-classification", "version": version,
                      "grader": f"ct-abnormality-classification@{version}"}
    (reward.parent / "grader.json").unlink()
    sub.write_text("{not json")
    proc = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2
    assert json.loads((reward.parent / "grader.json").read_text())["version"] == version
