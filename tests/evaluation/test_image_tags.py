"""Content-addressed images: two checkouts sharing one Docker engine each run their own graders.

The base image's tag is a digest of the build recipe and every grader file baked in
(evaluation/runner/base.py), task and harness images are built FROM that exact tag, and the
runner resolves the tag from its own checkout, never from the moving alias. A checkout whose
images are not built is told so by name ("run scripts/build-images"), by the runner and by the
worker's health check.
"""

import os
import shutil
import subprocess

import pytest

from tests.evaluation import verification_support as vs

pytestmark = [pytest.mark.docker]

CT = "ct-abnormality-classification/synthetic_01"
CT_GRADER = "evaluation/categories/ct_abnormality_classification/grader.py"
SABOTAGE = ("\n\ndef grade(answer, submission, **options):  # the other checkout's grader\n"
            "    raise RuntimeError('graded by the other checkout')\n")


def _other_checkout(tmp_path):
    """A second checkout of this code whose ct-abnormality-classification grader differs."""
    other = tmp_path / "other-checkout"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("config", "evaluation", "scripts", "tasks", "submissions", "leaderboard",
                 "devtools", "templates"):
        shutil.copytree(vs.REPO / name, other / name, ignore=ignore, symlinks=True)
    for name in ("manage.py", "pyproject.toml"):
        shutil.copy2(vs.REPO / name, other / name)
    (other / ".venv").symlink_to(vs.REPO / ".venv")
    with open(other / CT_GRADER, "a") as fh:
        fh.write(SABOTAGE)
    return other


def _in(checkout, *args, env=None, timeout=900):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    full_env.update(DEBUG="1", HAB_BASE_ALIAS="", **(env or {}))
    return subprocess.run(args, cwd=checkout, env=full_env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_base_tag_is_a_digest_of_recipe_and_grader_files(tmp_path, docker_engine):
    """Changing a grader file or the build recipe changes the tag; a generator does not (it is
    not baked in); the same files give the same tag in any directory."""
    from evaluation import runner

    here = runner.base_image_tag()
    assert here.startswith("healthagentbench/base:") and len(here.rsplit(":", 1)[1]) == 24
    other = tmp_path / "copy"
    shutil.copytree(vs.REPO / "evaluation", other / "evaluation",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(vs.REPO / "scripts", other / "scripts")
    assert runner.base_image_tag(root=other) == here
    with open(other / "evaluation/categories/ct_abnormality_classification/generator.py",
              "a") as fh:
        fh.write("# build-time only\n")
    assert runner.base_image_tag(root=other) == here
    with open(other / "scripts/build-images", "a") as fh:
        fh.write("# a recipe change\n")
    recipe_changed = runner.base_image_tag(root=other)
    assert recipe_changed != here
    with open(other / CT_GRADER, "a") as fh:
        fh.write("# a grader change\n")
    assert runner.base_image_tag(root=other) not in (here, recipe_changed)
    assert CT_GRADER in runner.base_image_files()


def test_another_checkout_building_its_images_does_not_change_what_this_one_grades(
        tmp_path, docker_engine):
    """A second checkout with a different grader: before its build its worker is unhealthy and
    names the fix; `scripts/build-images` there builds its own tags (and leaves the moving
    alias alone with HAB_BASE_ALIAS=); its verifier then runs its grader (the oracle fails),
    while this checkout still resolves and runs its own (the oracle passes)."""
    import docker

    from evaluation import runner

    here_tag = runner.base_image_tag()
    here_id = runner.ensure_base_image()
    client = runner.client()
    alias_before = _image_id(client, "healthagentbench/base:bookworm")
    oracle = vs.oracle_outputs(tmp_path / "oracle", only=[CT])[CT]

    other = _other_checkout(tmp_path)
    other_tag = runner.base_image_tag(root=other)
    assert other_tag != here_tag
    built = []
    try:
        health = _in(other, str(other / ".venv/bin/python"), "manage.py", "worker_health")
        assert health.returncode == 1, health.stdout + health.stderr
        assert (f"FAIL base image {other_tag}: missing: run scripts/build-images"
                in health.stdout), health.stdout

        base = _in(other, "scripts/build-images", "--base")
        assert base.returncode == 0, base.stderr[-3000:]
        built.append(other_tag)
        assert f"built {other_tag}" in base.stderr
        task = _in(other, str(other / ".venv/bin/python"), "-m", "evaluation.runner",
                   "build-task-images", f"tasks/{CT}")
        assert task.returncode == 0, task.stdout + task.stderr
        other_task_tag = task.stdout.split()[1]
        built.append(other_task_tag)
        assert other_task_tag != runner.task_image_tag(vs.REPO / "tasks" / CT)
        # The other checkout's image is FROM its own base tag, whatever the alias says.
        parent_chain = {layer["Id"] for layer in client.api.history(other_task_tag)}
        assert client.images.get(other_tag).id in parent_chain

        grade = (
            "import django, json, sys; django.setup()\n"
            "from pathlib import Path\n"
            "from evaluation import runner\n"
            f"run = runner.run_verifier(Path('tasks/{CT}'), job_id='tags-other-{vs.SESSION}',"
            f" artifacts_dir=Path(sys.argv[1]))\n"
            "print(json.dumps({'reward': run.reward, 'image': runner.task_image_tag("
            f"Path('tasks/{CT}'))}}))\n")
        other_run = _in(other, str(other / ".venv/bin/python"), "-c", grade, str(oracle),
                        env={"DJANGO_SETTINGS_MODULE": "config.settings"})
        assert other_run.returncode == 0, other_run.stderr[-3000:]
        assert f'"image": "{other_task_tag}"' in other_run.stdout
        assert '"reward": 1' not in other_run.stdout, other_run.stdout

        mine = runner.run_verifier(vs.REPO / "tasks" / CT, job_id=f"tags-here-{vs.SESSION}",
                                   artifacts_dir=oracle)
        assert mine.reward == 1.0, (mine.error, mine.result.text)
        assert runner.base_image_tag() == here_tag and runner.ensure_base_image() == here_id
        assert _image_id(client, "healthagentbench/base:bookworm") == alias_before
    finally:
        for tag in reversed(built):
            try:
                client.images.remove(tag)
            except docker.errors.APIError:
                pass

    # Without this checkout's base tag, the runner says exactly what to run.
    with pytest.raises(runner.InfrastructureError,
                       match=rf"base image {other_tag} .* is missing: run scripts/build-images"):
        _ensure_other(runner, other)


def _ensure_other(runner, other):
    from django.test import override_settings

    with override_settings(BASE_DIR=other):
        return runner.ensure_base_image()


def _image_id(client, tag):
    import docker

    try:
        return client.images.get(tag).id
    except docker.errors.ImageNotFound:
        return None


def test_health_checks_the_harness_image_of_a_configured_installed_agent(
        docker_engine, settings):
    """With mini-swe-agent configured for the re-run (and a model endpoint to run it with), the
    worker's health names its harness image and the command that builds it; without a model
    endpoint nothing is re-run and the harness image is not needed."""
    from evaluation import runner
    from evaluation.health import worker_health
    from evaluation.runner.harnesses import harness_dockerfile

    settings.VERIFICATION_CHECKS = ["regrade", "replay", "rerun"]
    settings.VERIFICATION_HARBOR_AGENTS = {"terminus-2": [], "mini-swe-agent": ["2.4.6"]}
    settings.VERIFICATION_RERUN_MODEL_ENDPOINTS = {}
    assert not [c for c in worker_health()["checks"] if c["name"].startswith("harness image")]

    settings.VERIFICATION_RERUN_MODEL_ENDPOINTS = {
        "openai/gpt-test": {"base_url": "http://127.0.0.1:9/v1", "key_secret": "K"}}
    tag = runner.harness_image_tag(runner.installed_harness("mini-swe-agent"))
    report = worker_health()
    harness = [c for c in report["checks"] if c["name"].startswith("harness image")]
    assert [c["name"] for c in harness] == [f"harness image {tag}"]
    if runner.image_exists(tag):
        assert harness[0]["ok"] and harness[0]["detail"] == "present"
    else:
        assert not report["healthy"]
        assert (f"harness image {tag}: missing: run scripts/build-images --harness "
                "mini-swe-agent" in " ".join(report["problems"]))
    # The harness image is built FROM this checkout's base tag.
    dockerfile = harness_dockerfile(runner.installed_harness("mini-swe-agent"), "uv.whl")
    assert dockerfile.startswith(f"FROM {runner.base_image_tag()}\n")
