"""The served task packages, without Docker: each is the committed package
with Harbor's ``[environment].docker_image`` naming its published image by digest;
`manage.py publish_packages` writes and commits them, /registry.json points Harbor at them and
names the images, and intake accepts a job run from them as a run of the committed packages.
The real push, pull and `harbor run -d` are tests/evaluation/test_registry_journey.py
(marker ``registry``)."""

from __future__ import annotations

import hashlib
import html
import json
import re
import subprocess
import tomllib
from io import StringIO
from pathlib import Path

import pytest
from dirhash import dirhash
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from devtools.harbor_fixtures import HarborJobBuilder, build_metadata
from evaluation.published import (
    PublishedImagesError,
    read_record,
    served_digests,
    served_task_toml,
    write_served_package,
)
from evaluation.runner.publish import PublishError, registry_check
from evaluation.task_specs import iter_package_files, package_digest
from submissions.metadata import parse_metadata
from submissions.validation import validate_submission

REPO = Path(__file__).resolve().parents[2]
SLUG = "healthagentbench-synthetic@1.0"
RELEASED = tomllib.loads((REPO / "tasks" / "benchmarks" / f"{SLUG}.toml").read_text())["tasks"]
REGISTRY = "127.0.0.1:5000"


def _image(name: str) -> str:
    """A reference by digest, as the registry would name one (the digest is derived from the
    name: these tests read and write references, they pull nothing)."""
    return f"{REGISTRY}/hab-task/{name}@sha256:{hashlib.sha256(name.encode()).hexdigest()}"


def _record(path: Path, names=tuple(RELEASED)) -> Path:
    tasks = {RELEASED[n]: {"name": n, "package_path": f"tasks/{n}", "images": [_image(n)]}
             for n in names}
    path.write_text(json.dumps({"format": 1, "registry": REGISTRY, "base": {}, "harnesses": {},
                                "tasks": tasks}))
    return path


def test_the_served_task_toml_adds_one_line_to_every_package():
    for name in RELEASED:
        text = (REPO / "tasks" / name / "task.toml").read_text()
        served = served_task_toml(text, _image(name))
        added = [line for line in served.splitlines() if line not in text.splitlines()]
        assert added == [f'docker_image = "{_image(name)}"'], name
        assert served.replace(added[0] + "\n", "") == text
        before, after = tomllib.loads(text), tomllib.loads(served)
        assert after["environment"].pop("docker_image") == _image(name)
        assert after == before
        # The line is the first of the [environment] table.
        lines = served.splitlines()
        assert lines[lines.index("[environment]") + 1] == added[0]


def test_a_package_without_an_environment_table_or_with_an_image_and_a_tag_reference():
    bare = '[task]\nname = "x"\n'
    assert tomllib.loads(served_task_toml(bare, _image("a/b")))["environment"] == {
        "docker_image": _image("a/b")}
    named = '[environment]\ndocker_image = "elsewhere/image:1"\n'
    assert served_task_toml(named, _image("a/b")) == named  # already prebuilt: as it is
    with pytest.raises(PublishedImagesError, match="not an image reference by digest"):
        served_task_toml(bare, f"{REGISTRY}/hab-task/a/b:latest")


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not a readable JSON record"),
    ('{"format": 2, "tasks": {}}', "not a format-1 published-images record"),
    ('{"format": 1, "tasks": {"ab": {"images": ["127.0.0.1:5000/hab-task/a/b:latest"]}}}',
     "must list its images by digest"),
])
def test_a_broken_record_is_refused_naming_the_file(tmp_path, content, message):
    path = tmp_path / "published-images.json"
    path.write_text(content)
    with pytest.raises(PublishedImagesError, match=message) as info:
        read_record(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("name", ["", "HTTP://x", "127.0.0.1:5000/", "host:port", "a b"])
def test_an_image_registry_that_is_not_a_registry_name_is_refused(name):
    if name == "127.0.0.1:5000/":
        assert registry_check(name) == "127.0.0.1:5000"  # a trailing slash is forgiven
        return
    with pytest.raises(PublishError, match="is not a registry name"):
        registry_check(name)


def _publish(out: Path, *args: str) -> str:
    buf = StringIO()
    call_command("publish_packages", "--out", str(out), *args, stdout=buf)
    return buf.getvalue()


@pytest.mark.django_db
def test_publish_packages_commits_the_served_packages_and_registry_json_points_harbor_at_them(
        tmp_path, settings):
    settings.PUBLISHED_IMAGES_FILE = str(_record(tmp_path / "published-images.json"))
    call_command("sync_tasks", verbosity=0)
    out = tmp_path / "served"
    text = _publish(out, "--commit")
    assert f"wrote {SLUG}: 7 packages" in text
    commit = text.strip().splitlines()[-1]
    git = ["git", "-C", str(out)]
    assert subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,  # noqa: S603, S607
                          check=True).stdout.strip() == commit
    for name, digest in RELEASED.items():
        src, dst = REPO / "tasks" / name, out / "tasks" / name
        files = [p.relative_to(src) for p in iter_package_files(src)]
        assert [p.relative_to(dst) for p in iter_package_files(dst)] == files
        for rel in files:
            if rel.name != "task.toml":
                assert (dst / rel).read_bytes() == (src / rel).read_bytes(), rel
        assert tomllib.loads((dst / "task.toml").read_text())["environment"][
            "docker_image"] == _image(name)
        # What Harbor will lock (lock.json task.digest) and hash (task_checksum) for it.
        (served,) = served_digests(src, digest)
        assert served[0] == package_digest(dst) != digest
    # Twice: the same files, no second commit.
    assert _publish(out, "--commit").strip().splitlines()[-1] == commit

    settings.REGISTRY_GIT_URL = f"file://{out}"
    settings.REGISTRY_GIT_COMMIT = commit
    (dataset,) = [d for d in Client().get("/registry.json").json()
                  if f"{d['name']}@{d['version']}" == SLUG]
    assert {(t["git_url"], t["git_commit_id"]) for t in dataset["tasks"]} == {
        (f"file://{out}", commit)}
    for task in dataset["tasks"]:
        name = task["path"].removeprefix("tasks/")
        assert task["docker_image"] == _image(name)
        assert (out / task["path"] / "task.toml").is_file()


@pytest.mark.django_db
def test_a_version_with_an_unpublished_package_is_not_published(tmp_path, settings):
    missing = "xray-report-correction/synthetic_01"
    record = _record(tmp_path / "published-images.json",
                     names=[n for n in RELEASED if n != missing])
    settings.PUBLISHED_IMAGES_FILE = str(record)
    call_command("sync_tasks", verbosity=0)
    buf = StringIO()
    with pytest.raises(CommandError, match="no benchmark version has every package published"):
        call_command("publish_packages", "--out", str(tmp_path / "served"), stdout=buf)
    assert f"skipped {SLUG}: no image for {missing}" in buf.getvalue()
    (dataset,) = [d for d in Client().get("/registry.json").json()
                  if f"{d['name']}@{d['version']}" == SLUG]
    assert [t["path"] for t in dataset["tasks"] if "docker_image" not in t] == [
        f"tasks/{missing}"]


def _served_job(tmp_path: Path) -> Path:
    digests, checksums = {}, {}
    for name in RELEASED:
        served = tmp_path / "served" / name
        write_served_package(REPO / "tasks" / name, served, _image(name))
        digests[name] = package_digest(served)
        checksums[name] = dirhash(str(served), "sha256")
    tree = tmp_path / "upload"
    HarborJobBuilder(digests, checksums=checksums, harbor_version="0.26.0").build(tree)
    return tree


@pytest.mark.django_db
def test_intake_accepts_a_job_run_from_the_served_packages_only_while_they_are_published(
        tmp_path, settings):
    from evaluation.models import BenchmarkVersion
    from submissions.harbor_intake import _spec

    call_command("sync_tasks", verbosity=0)
    bv = BenchmarkVersion.objects.get(name=SLUG.split("@")[0], version="1.0")
    tree = _served_job(tmp_path)
    meta = parse_metadata(build_metadata(harness="oracle", harness_version="1.0.0",
                                         models=[{"model_name": "none", "model_provider": "none",
                                                  "model_display_name": "no model",
                                                  "model_org_display_name": "none"}]))
    # Not published: other content than the version's, every task named.
    report = validate_submission(tree, meta, _spec(bv))
    mismatched = {name for name in RELEASED for p in report.problems
                  if p.code == "task_digest_mismatch" and f" {name} " in p.message}
    assert mismatched == set(RELEASED), [p.as_dict() for p in report.problems]
    # Published: the served packages are the version's packages.
    settings.PUBLISHED_IMAGES_FILE = str(_record(tmp_path / "published-images.json"))
    report = validate_submission(tree, meta, _spec(bv))
    assert [p for p in report.problems if p.code.startswith("task_")] == []
    assert report.ok, [p.as_dict() for p in report.problems]


def test_manage_py_check_names_a_broken_or_missing_record(tmp_path, settings):
    from evaluation.checks import published_images_readable

    assert published_images_readable() == []  # nothing configured: nothing published
    settings.PUBLISHED_IMAGES_FILE = str(tmp_path / "absent.json")
    (warning,) = published_images_readable()
    assert warning.id == "evaluation.W001" and "absent.json is missing" in warning.msg
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": 1, "tasks": {"ab": {"images": ["reg/a:latest"]}}}')
    settings.PUBLISHED_IMAGES_FILE = str(broken)
    (error,) = published_images_readable()
    assert error.id == "evaluation.E003" and "must list its images by digest" in error.msg
    settings.PUBLISHED_IMAGES_FILE = str(_record(tmp_path / "published-images.json"))
    assert published_images_readable() == []


@pytest.mark.django_db
def test_the_submit_page_shows_harbor_run_d_once_every_package_is_published(tmp_path, settings):
    """With every package of the version published and /registry.json
    pointing Harbor at the served packages, the Submit page's run step is one `harbor run -d`
    (nothing to clone or build), collecting both outputs; with one package unpublished, or no
    git URL and commit for the served packages, it shows the clone path and says why."""
    call_command("sync_tasks", verbosity=0)
    settings.REGISTRY_GIT_URL = "https://git.example.org/served.git"
    settings.REGISTRY_GIT_COMMIT = "0123456789abcdef0123456789abcdef01234567"

    def blocks():
        page = Client().get(f"/submit/?benchmark={SLUG}").content.decode()
        return {m.group(1): html.unescape(m.group(2)) for m in re.finditer(
            r'<pre data-testid="([a-z-]+)">(.*?)</pre>', page, re.S)}, page

    settings.PUBLISHED_IMAGES_FILE = str(_record(tmp_path / "all.json"))
    shown, page = blocks()
    assert shown["submit-setup"] == "pip install harbor" and 'data-testid="served-note"' in page
    assert shown["harbor-command"] == (
        f"harbor run -d {SLUG} --registry-url http://testserver/registry.json \\\n"
        "    -a <your agent> -m <provider/model> -k 3 \\\n"
        "    --artifact /workspace/submission.json --artifact /workspace/output -y")
    assert shown["client-download"].splitlines()[2] == (
        f"python3 hab-submit.py metadata --benchmark {SLUG} jobs/*/ > metadata.yaml")

    for record, git_commit in ((_record(tmp_path / "six.json", names=list(RELEASED)[:-1]),
                                settings.REGISTRY_GIT_COMMIT),
                               (_record(tmp_path / "again.json"), "")):
        settings.PUBLISHED_IMAGES_FILE = str(record)
        settings.REGISTRY_GIT_COMMIT = git_commit
        shown, page = blocks()
        assert shown["submit-setup"].startswith("git clone ") and "harbor run -p" in \
            shown["harbor-command"] and 'data-testid="clone-note"' in page
    # A broken record (which `manage.py check` names, E003) leaves the page on the clone path.
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    settings.PUBLISHED_IMAGES_FILE = str(broken)
    settings.REGISTRY_GIT_COMMIT = "0123456789abcdef0123456789abcdef01234567"
    shown, page = blocks()
    assert shown["submit-setup"].startswith("git clone ") and 'data-testid="clone-note"' in page
