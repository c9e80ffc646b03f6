"""R13 (reliability matrix): grading is deterministic. The same output graded twice, and a third
time in parallel with four other grading jobs, gives byte-identical results, from the same
digest-pinned image."""

import json
import shutil
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.evaluation import verification_support as vs

pytestmark = pytest.mark.docker

TARGET = "ehr-event-modeling/synthetic_01"  # AUROC against a stored baseline: floats
OTHERS = ["clinical-trial-matching/synthetic_01", "ct-abnormality-classification/synthetic_01",
          "ehr-data-quality-audit/synthetic_01", "pathology-tumor-region/synthetic_01"]


def _perturbed(oracle: Path, dest: Path) -> Path:
    """The oracle's event-model predictions with every other score inverted: a run whose
    AUROC is strictly between 0 and 1, so the grader's numbers are not trivial."""
    shutil.copytree(oracle, dest)
    path = dest / "workspace" / "submission.json"
    doc = json.loads(path.read_text())
    preds = doc["predictions"]
    for i, key in enumerate(sorted(preds)):
        if i % 2:
            preds[key] = 1.0 - float(preds[key])
    path.write_text(json.dumps(doc))
    return dest


def _grade(name: str, artifacts: Path) -> dict:
    from evaluation import runner

    tdir = vs.REPO / "tasks" / name
    image = runner.task_image_tag(tdir)
    v = runner.run_verifier(tdir, job_id=f"r13{uuid.uuid4().hex[:8]}", artifacts_dir=artifacts)
    assert v.error is None and v.reward is not None, (name, v.error, v.result.text)
    return {"reward": v.reward, "rewards": v.rewards, "log": v.result.text,
            "image_id": runner.client().images.get(image).id}


def test_r13_same_output_graded_twice_and_in_parallel_gives_identical_results(tmp_path_factory):
    """R13: one output graded alone twice, then again while four other tasks are graded in
    parallel (five verifier containers at once): reward, the grader's full reward document and
    its log are identical each time, and so is the image digest. The test fails on any
    difference. Pinned: image digests (task_image_tag), the graders' inputs (no grader draws
    random numbers: baselines are stored in the answer files), and TZ=UTC and
    PYTHONHASHSEED=0 in every container the runner starts (asserted below)."""
    outputs = vs.oracle_outputs(tmp_path_factory.mktemp("oracle"), only=[TARGET, *OTHERS])
    target = _perturbed(outputs[TARGET], tmp_path_factory.mktemp("r13") / "target")
    first = _grade(TARGET, target)
    assert 0.0 < float(first["rewards"].get("auroc", 0.5)) < 1.0, first["rewards"]
    second = _grade(TARGET, target)
    with ThreadPoolExecutor(max_workers=5) as pool:
        parallel = pool.submit(_grade, TARGET, target)
        others = [pool.submit(_grade, name, outputs[name]) for name in OTHERS]
        third = parallel.result()
        other_results = [f.result() for f in others]
    assert second == first
    assert third == first
    assert all(r["reward"] == 1.0 for r in other_results), [r["rewards"] for r in other_results]
    from evaluation import runner

    with runner.ContainerRun(runner.base_image_tag(), purpose="test",
                             job_id=f"r13{uuid.uuid4().hex[:6]}") as run:
        env = run.exec("echo $TZ $PYTHONHASHSEED; date +%Z").text.split()
    assert env == ["UTC", "0", "UTC"], env
    print(f"\nR13: {TARGET} graded 3 times (once beside 4 parallel jobs): "
          f"identical {json.dumps(first['rewards'], sort_keys=True)}")
