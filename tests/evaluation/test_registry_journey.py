"""Task images from an OCI registry, and a submitter's journey from nothing (points 1
and 4). Marked ``registry``: `make test` deselects it, .ci/run runs it (-m registry).

The registry is Debian's docker-registry (CNCF distribution 2.8) on a loopback port, started
here. `IMAGE_REGISTRY=<it> scripts/build-images` (what `make images` runs) pushes the base and
task images and records them by digest. Then:

1. a second Docker engine with nothing built (tests/evaluation/registry_support.py) pulls every
   task image of healthagentbench-synthetic@1.0 from the registry: the same images, by id;
2. the journey: a live site with a real Celery worker serves /registry.json for the served
   packages (`manage.py publish_packages --commit`: the committed packages with
   `[environment].docker_image` naming each image by digest, in a git repository Harbor clones),
   and from an empty directory, with an empty HOME (no Harbor cache), only the Harbor CLI and
   the second engine, the submitter runs the three commands the live Submit page shows (read
   from the page; with published packages it shows `harbor run -d`, not the clone path):

       harbor run -d healthagentbench-synthetic@1.0 --registry-url <site>/registry.json -a oracle -k 3 ...
       python3 hab-submit.py metadata jobs/*/ > metadata.yaml      (after curl -O <site>/client/hab-submit.py)
       python3 hab-submit.py --url <site> --token "$HAB_TOKEN" --metadata metadata.yaml jobs/*/

   Harbor pulls the seven images (and builds none), runs the 21 oracle trials, the client writes
   the metadata from the job (the submitter's review replaces its TODO lines) and uploads it;
   the site accepts the served packages' digests and its worker, on the site's own engine and
   locally built images, reaches a verdict.

Figures (printed; not asserted): bytes pushed, push and pull times, the harbor run wall time.
Needs root (dockerd, ip), PostgreSQL (the worker shares the test database) and Docker.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluation.published import read_record, served_digests
from tests.evaluation import verification_support as vs
from tests.evaluation.registry_support import ImageRegistry, SecondEngine
from tests.harbor_cli import HarborRun, harbor_environment, review_metadata, run_all

pytestmark = [pytest.mark.registry, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
SLUG = "healthagentbench-synthetic@1.0"
VERSION_FILE = REPO / "tasks" / "benchmarks" / f"{SLUG}.toml"
HARBOR_TIMEOUT_S = 900
VERDICT_TIMEOUT_S = 1500
XRAY = "xray-report-correction"
REVIEWED = {"agent_display_name": "Oracle (reference solutions)",
            "agent_url": "https://github.com/harbor-framework/harbor",
            "agent_org_display_name": "Harbor"}


def _released() -> dict[str, str]:
    """The version's packages and their pinned content digests."""
    return tomllib.loads(VERSION_FILE.read_text())["tasks"]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    reg = ImageRegistry(tmp_path_factory.mktemp("registry")).start()
    yield reg
    reg.stop()


@pytest.fixture(scope="module")
def pushed(registry, tmp_path_factory):
    """`IMAGE_REGISTRY=<registry> scripts/build-images`: (the record's path, its JSON)."""
    record = tmp_path_factory.mktemp("record") / "published-images.json"
    env = {**os.environ, "IMAGE_REGISTRY": registry.address,
           "HAB_PUBLISHED_IMAGES": str(record)}
    t0 = time.monotonic()
    done = subprocess.run([str(REPO / "scripts" / "build-images")], cwd=REPO, env=env,  # noqa: S603
                          capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    print(f"IMAGE_REGISTRY={registry.address} scripts/build-images (cached builds, every push): "
          f"{time.monotonic() - t0:.0f} s")
    return record, json.loads(record.read_text())


@pytest.fixture
def second_engine(tmp_path):
    engine = SecondEngine(tmp_path / "engine").start()
    try:
        yield engine
    finally:
        engine.stop()


def _local_id(tag: str) -> str:
    done = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", tag],  # noqa: S603, S607
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_make_images_pushes_by_digest_and_an_empty_engine_pulls_every_task_image(
        registry, pushed, second_engine):
    _, doc = pushed
    released = _released()
    assert doc["registry"] == registry.address
    assert doc["base"]["image"].startswith(f"{registry.address}/healthagentbench/base@sha256:")
    tasks = read_record(pushed[0])
    # Every package of the version is published, by digest, under its own repository.
    assert set(released.values()) <= set(tasks)
    refs = {}
    for name, digest in released.items():
        task = tasks[digest]
        assert task.name == name and task.package_path == f"tasks/{name}"
        assert task.image.startswith(f"{registry.address}/hab-task/{name}@sha256:"), task.image
        refs[name] = task.image
    assert second_engine.images() == []  # nothing built, nothing pulled

    t0 = time.monotonic()
    for ref in refs.values():
        second_engine.docker("pull", "-q", ref)
    pull_s = time.monotonic() - t0
    # The very images the site built: the pulled image's id is the local image's id.
    for name, ref in refs.items():
        pulled = second_engine.docker("image", "inspect", "--format", "{{.Id}}", ref).stdout
        assert pulled.strip() == _local_id(doc["tasks"][released[name]]["local"]), name
    # And one runs there: the task's data and the graders of the base image are in it.
    run = second_engine.docker("run", "--rm", refs[XRAY + "/synthetic_01"], "sh", "-c",
                               "ls /workspace/data && python3 -c 'import evaluation.graders'")
    assert "case_01" in run.stdout, run.stdout + run.stderr
    size = registry.pushed_bytes([doc["base"]["image"], *refs.values()])
    print(f"pushed: {len(refs) + 1} images (base + {len(refs)} tasks), "
          f"{size / 1e6:.0f} MB of distinct compressed blobs; an empty engine pulled the "
          f"{len(refs)} task images in {pull_s:.1f} s")


def test_r20_a_registry_that_does_not_answer_fails_the_push_and_keeps_the_record(
        registry, pushed, tmp_path):
    """R20: the registry stops answering during `IMAGE_REGISTRY=... make images`: the push fails
    naming the registry and the image, and the record of the last complete push is left as it
    was (the site keeps serving what it served)."""
    record = tmp_path / "published-images.json"
    shutil.copyfile(pushed[0], record)
    before = record.read_bytes()
    dead = ImageRegistry(tmp_path / "dead")  # a free port nobody serves
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run(  # noqa: S603
        [str(REPO / ".venv" / "bin" / "python"), "-m", "evaluation.runner", "push-images",
         "--registry", dead.address, "--record", str(record)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAIL  push to {dead.address}: pushing {dead.address}/healthagentbench/base:" \
        in done.stdout, done.stdout
    assert record.read_bytes() == before


# ------------------------------------------------------------------ the journey from nothing


@pytest.fixture
def site(live_server, settings, tmp_path, pushed):
    """The site as its maintainers run it with published images: the record, the served
    packages committed in a git repository, a worker (intake and verification) on the site's
    own engine; a submitter account with an API token."""
    from django.contrib.auth import get_user_model

    from config.celery import app
    from submissions.services import token_issue

    vs.shared_database_url()  # skips on SQLite, which a worker process cannot share
    record, _ = pushed
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.PUBLISHED_IMAGES_FILE = str(record)
    call_command("sync_tasks", verbosity=0)
    packages = tmp_path / "served-packages"
    out = _call("publish_packages", "--out", str(packages), "--commit")
    commit = out.strip().splitlines()[-1]
    settings.REGISTRY_GIT_URL = f"file://{packages}"
    settings.REGISTRY_GIT_COMMIT = commit
    user = get_user_model().objects.create_user("newcomer", "n@example.org", "pw-newcomer-123!")
    _, token = token_issue(user=user)
    worker = vs.Worker(media_root=Path(settings.MEDIA_ROOT), queue=f"{vs.QUEUE}-registry",
                       env={"VERIFICATION_RERUN_FIRST_TASKS": "1",
                            "VERIFICATION_RERUN_MAX_TRIALS": "1",
                            "PUBLISHED_IMAGES_FILE": str(record)}).start()
    settings.VERIFICATION_QUEUE = worker.queue
    settings.INTAKE_QUEUE = worker.queue
    broker = app.conf.broker_url
    vs.point_celery_at(vs.BROKER_URL)
    try:
        yield {"url": live_server.url, "token": token, "worker": worker, "packages": packages,
               "commit": commit, "record": record}
    finally:
        worker.stop()
        vs.redis_client().delete(worker.queue)
        vs.point_celery_at(broker)


def _call(*args: str) -> str:
    from io import StringIO

    buf = StringIO()
    call_command(*args, stdout=buf)
    return buf.getvalue()


def _submit_page(base: str) -> dict[str, str]:
    """The Submit page's command blocks, as a visitor copies them (HTML unescaped)."""
    with urllib.request.urlopen(f"{base}/submit/?benchmark={SLUG}", timeout=60) as response:  # noqa: S310 - live server
        page = response.read().decode()
    return {m.group(1): html.unescape(m.group(2)) for m in re.finditer(
        r'<pre data-testid="([a-z-]+)">(.*?)</pre>', page, re.S)}


def _harbor_d(page: dict[str, str], work: Path, engine: SecondEngine) -> HarborRun:
    """The Submit page's first command, with Harbor's oracle as the agent, from ``work``
    (empty), with an empty HOME and the second engine as the submitter's Docker."""
    assert page["submit-setup"] == "pip install harbor", page["submit-setup"]
    command = page["harbor-command"]
    assert command.startswith(f"harbor run -d {SLUG} --registry-url ") and " -k 3 " in command \
        and "--artifact /workspace/submission.json --artifact /workspace/output -y" in command, \
        command
    env = harbor_environment()  # the pinned Harbor: the page's `pip install harbor`, done
    env.update(HOME=str(work.parent / "home"), DOCKER_HOST=engine.host)
    Path(env["HOME"]).mkdir()
    command = command.replace("-a <your agent> -m <provider/model>", "-a oracle")
    return run_all({"harbor-d": (["bash", "-euc", command], work / "jobs")}, cwd=work, env=env,
                   timeout_s=HARBOR_TIMEOUT_S)["harbor-d"]


def _check_the_run(run: HarborRun, site: dict, engine: SecondEngine) -> Path:
    """21 trials of the served packages, each run in the pulled image; returns the job dir."""
    assert run.returncode == 0, run.output[-6000:]
    (job,) = [p for p in (run.job_dir).iterdir() if p.is_dir()]
    trials = HarborRun(name="job", cmd=run.cmd, returncode=0, output="", seconds=run.seconds,
                       job_dir=job)
    assert len(trials.trials()) == 21, trials.report()
    record = read_record(site["record"])
    for trial in trials.trials():
        result = json.loads((trial / "result.json").read_text())
        task = result["config"]["task"]
        # Fetched from the served packages at the registry's commit, not from any checkout.
        assert (task["git_url"], task["git_commit_id"]) == (
            f"file://{site['packages']}", site["commit"]), task
        name = task["path"].removeprefix("tasks/")
        reward = (result.get("verifier_result") or {}).get("rewards", {}).get("reward")
        # The X-ray verifier has no judge on the submitter's machine: no grade there.
        assert reward == (None if name.startswith(XRAY) else 1), (name, trials.report())
        # Harbor locked the served package: the committed one plus the image line.
        lock = json.loads((trial / "lock.json").read_text())
        digest = _released()[name]
        served = served_digests(REPO / "tasks" / name, digest)
        assert {(lock["task"]["digest"].removeprefix("sha256:"), result["task_checksum"])} \
            == served, name
        toml = tomllib.loads((site["packages"] / task["path"] / "task.toml").read_text())
        assert toml["environment"]["docker_image"] == record[digest].image
    # The submitter's engine pulled the seven images and built nothing.
    pulled = {f"{i['Repository']}@{i['Digest']}" for i in engine.images()}
    assert pulled == {record[d].image for d in _released().values()}, engine.images()
    return job


def _metadata(page: dict[str, str], work: Path) -> None:
    """The page's download and metadata lines, run by the machine's python3 (no Django, no
    clone); the submitter's review replaces the TODO lines."""
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(work.parent / "home")}
    download, checksum, metadata = page["client-download"].splitlines()
    subprocess.run(["bash", "-euc", download], cwd=work, env=bare, check=True, timeout=60)  # noqa: S603, S607
    digest = subprocess.run(["bash", "-euc", checksum], cwd=work, env=bare, check=True,  # noqa: S603, S607
                            timeout=60, capture_output=True, text=True).stdout.split()[0]
    assert checksum.endswith(f"# {digest}"), (checksum, digest)
    subprocess.run(["bash", "-euc", metadata], cwd=work, env=bare, check=True, timeout=60)  # noqa: S603, S607
    text = (work / "metadata.yaml").read_text()
    assert f'benchmark: "{SLUG}"' in text and 'harness: "oracle"' in text, text
    review_metadata(work / "metadata.yaml", REVIEWED)


@pytest.mark.django_db(transaction=True)
def test_a_newcomer_with_only_harbor_and_docker_runs_the_three_commands_to_a_verdict(
        site, second_engine, tmp_path):
    base = site["url"]
    work = tmp_path / "empty"
    work.mkdir()
    assert list(work.iterdir()) == []
    page = _submit_page(base)
    t0 = time.monotonic()
    run = _harbor_d(page, work, second_engine)
    harbor_s = time.monotonic() - t0
    job = _check_the_run(run, site, second_engine)

    _metadata(page, work)
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(work.parent / "home"),
            "HAB_TOKEN": site["token"]}
    t0 = time.monotonic()
    assert page["client-command"].startswith(f"python3 hab-submit.py --url {base} "), page
    upload = subprocess.run(  # noqa: S603 - the page's third command
        ["bash", "-euc", page["client-command"]],
        cwd=work, env=bare, capture_output=True, text=True, timeout=VERDICT_TIMEOUT_S,
        check=False)
    verify_s = time.monotonic() - t0
    assert upload.returncode == 0, (upload.stdout + upload.stderr[-4000:],
                                    site["worker"].tail())
    answer = json.loads(upload.stdout.splitlines()[0])

    from submissions.models import Submission

    sub = Submission.objects.get(pk=answer["id"])
    # The oracle's try-out is a reference run on a try-out version: once its verdict is
    # verified or consistent, the site publishes it itself, as an unranked reference row.
    assert sub.status == "published", (sub.status, site["worker"].tail())
    assert sub.coverage["verdict"] in ("verified", "consistent"), sub.coverage
    assert sub.status in upload.stdout
    assert sub.entries.get().verification_level == "reference"
    assert sub.is_reference and sub.owner.username == "newcomer"
    assert sub.trials.count() == 21
    assert sub.trials.filter(verified_reward=1.0).count() == 21
    xray = sub.trials.filter(benchmark_task__category__slug=XRAY)
    assert [t.outcome for t in xray] == ["passed"] * 3
    assert job.name in {p.name for p in (work / "jobs").iterdir()}
    print(f"harbor run -d (21 oracle trials, 7 images pulled by an empty engine): "
          f"{harbor_s:.0f} s; upload to verdict ({sub.coverage['verdict']}, {sub.status}): {verify_s:.0f} s")
