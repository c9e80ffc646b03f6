"""Every Harbor release people use: real job directories written by real
Harbor CLIs, uploaded, validated and verified. Marked ``harbor_releases``: `make test` deselects
it, .ci/run runs it (-m harbor_releases).

Each release has its own venv outside the checkout (`scripts/harbor-venv --release V`, from the
hashed lock tests/harbor_releases/requirements-V.txt; the wheels are fetched once into
/var/cache/hab-harbor, later installs run offline); the newest, 0.26.0, is the project's own pin
(requirements-harbor.txt, .venv-harbor). For each release, the Submit page's loop (one
`harbor run -p tasks/<category> ... --artifact <output>` job per category) runs twice over the
seven synthetic tasks:

- Harbor's ``oracle`` agent (the reference solutions): every trial passes;
- a failing scripted agent (tests/harbor_releases/wrong_plan_agent.py, imported by Harbor with
  the release's own custom-agent option), which writes a wrong answer and an ATIF trajectory of
  what it ran: every trial fails.

Then the served client (`hab-submit.py metadata`, the review of its TODO lines, and the upload
with --no-wait) sends each run to a live site; the intake validates it and the verification
(re-grade, replay, re-run sample) gives its verdict: the site's outcomes must be Harbor's.

A release the site does not accept is run too, and its jobs are refused with
``harbor_release_unsupported``, naming the accepted releases (Harbor 0.1.45, the last 0.1.x: its
mean metric takes a reward.json of one key, and these verifiers write sub-scores, so its jobs end
without their result.json; the test checks that reason on Harbor's own log).

HAB_RELEASE_ATTEMPTS (default 1) sets -k, and the version's attempts per task with it;
HAB_RELEASE_ATTEMPTS=3 is the full matrix whose figures docs/submitting.md#harbor-releases
gives (21 trials per agent and release). Each Harbor command runs under `umask 000`: the site's
engine remaps user namespaces (container root is an unprivileged host user), and Harbor bind-
mounts the trial's log folders, which that user must be able to write.

Needs PostgreSQL or SQLite (everything runs in this process but Harbor and the containers) and
Docker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluation.task_specs import version_packages
from submissions.harbor import OLDEST_ACCEPTED_HARBOR, TESTED_HARBOR_RELEASES, harbor_release_key
from tests.evaluation import verification_support as vs
from tests.harbor_cli import HarborRun, harbor_environment, review_metadata, run_all

pytestmark = [pytest.mark.harbor_releases, pytest.mark.docker,
              pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]
LOCKS = REPO / "tests" / "harbor_releases"
SLUG = "healthagentbench-synthetic@1.0"
PINNED = re.search(r"^harbor==(\S+)", (REPO / "requirements-harbor.txt").read_text(),
                   re.MULTILINE).group(1)
RELEASES = sorted({p.stem.removeprefix("requirements-") for p in LOCKS.glob("requirements-*.txt")}
                  | {PINNED}, key=harbor_release_key)
ACCEPTED = [v for v in RELEASES if harbor_release_key(v) >= harbor_release_key(OLDEST_ACCEPTED_HARBOR)]
REFUSED = [v for v in RELEASES if v not in ACCEPTED]
ATTEMPTS = int(os.environ.get("HAB_RELEASE_ATTEMPTS", "1"))
HARBOR_TIMEOUT_S = 900
WRONG_AGENT = "wrong_plan_agent:WrongPlanAgent"
XRAY = "xray-report-correction"
REVIEWED = {
    "oracle": {"agent_display_name": "Oracle (reference solutions)",
               "agent_url": "https://github.com/harbor-framework/harbor",
               "agent_org_display_name": "Harbor"},
    "wrong": {"agent_display_name": "Wrong plan (scripted)",
              "agent_url": "https://leaderboard.example.org/docs/submitting",
              "agent_org_display_name": "HealthAgentBench maintainers"},
}


def _categories() -> dict[str, tuple[Path, str]]:
    """category -> (its @1.0 package, the output path it declares: the loop's --artifact).
    A category directory also holds other versions' packages, so each job reads a copy of the
    category holding only this version's package (what every release can take with -p)."""
    out = {}
    for package in version_packages(REPO / "tasks", SLUG):
        path = tomllib.loads((package / "task.toml").read_text())["metadata"]["submission_path"]
        out[package.parent.name] = (package, path.rstrip("/"))
    return out


def test_the_matrix_covers_the_releases_the_issue_names_and_the_site_names_them():
    """The last 0.1.x, 0.13, 0.17, 0.20, 0.25 and the newest (the project's pin, 0.26.0); the
    site's list of tested releases is exactly the accepted part of this matrix."""
    assert RELEASES == ["0.1.45", "0.13.0", "0.17.0", "0.20.0", "0.25.0", "0.26.0"]
    assert tuple(ACCEPTED) == TESTED_HARBOR_RELEASES and REFUSED == ["0.1.45"]


@pytest.fixture
def site(settings, tmp_path, live_server, docker_engine):
    """A live site with the synthetic version registered (ATTEMPTS per task), verification
    in-process, the tests' X-ray judge, and a submitter with a token."""
    from django.contrib.auth import get_user_model

    from evaluation.models import BenchmarkVersion
    from submissions.services import token_issue

    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    settings.VERIFICATION_QUEUE = settings.INTAKE_QUEUE = vs.INPROC_QUEUE
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.XRAY_JUDGE_URL = vs.judge_stub().url
    settings.XRAY_JUDGE_MODEL = vs.JUDGE_MODEL
    settings.VERIFICATION_RERUN_FIRST_TASKS = settings.VERIFICATION_RERUN_MAX_TRIALS = 1
    vs.point_celery_at(vs.BROKER_URL)
    call_command("sync_tasks", verbosity=0)
    name, version = SLUG.split("@")
    assert BenchmarkVersion.objects.filter(name=name, version=version).update(
        attempts_per_task=ATTEMPTS) == 1
    user = get_user_model().objects.create_user("release-matrix", password="pw-release-1!")
    return {"url": live_server.url, "user": user, "token": token_issue(user=user)[1]}


def _help(env: dict) -> str:
    done = subprocess.run(["harbor", "run", "--help"], env={**env, "COLUMNS": "250"},  # noqa: S607
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def _harbor_loop(release: str, agents: tuple[str, ...], work: Path,
                 env: dict) -> dict[str, dict[str, HarborRun]]:
    """The Submit page's loop (one job per category) for each of ``agents`` under ``release``,
    all jobs side by side; each job directory is jobs-<agent>/<category>. Returns agent ->
    category -> its run."""
    usage = _help(env)
    yes = ["-y"] if "--yes" in usage else []  # 0.1.x asks nothing
    cmds, names = {}, {}
    for agent in agents:
        if agent == "oracle":
            agent_args = ["-a", "oracle"]
        elif "--agent-import-path" in usage:  # before 0.17: -a takes only built-in names
            agent_args = ["--agent-import-path", WRONG_AGENT]
        else:
            agent_args = ["-a", WRONG_AGENT]
        jobs = work / f"jobs-{agent}"
        for category, (package, output) in _categories().items():
            dataset = work / "dataset" / category
            if not dataset.is_dir():
                shutil.copytree(package, dataset / package.name)
            # -n 1: one trial at a time per job. The jobs already run side by side (14), and
            # each trial is a compose project with its own network: 42 at once (-k 3) exhaust
            # the engine's default address pools (about 30 networks), failing a trial to start.
            argv = ["harbor", "run", "-p", str(dataset), *agent_args,
                    "-k", str(ATTEMPTS), "-n", "1", "--env", "docker", "--artifact", output,
                    "-o", str(jobs), "--job-name", category, *yes]
            name = f"{release}-{agent}-{category}"
            cmds[name] = (["bash", "-c", 'umask 000 && exec "$@"', "harbor", *argv],
                          jobs / category)
            names[name] = (agent, category)
    runs = run_all(cmds, cwd=work, env=env, timeout_s=HARBOR_TIMEOUT_S, stagger_s=0.5)
    out: dict[str, dict[str, HarborRun]] = {a: {} for a in agents}
    for name, run in runs.items():
        agent, category = names[name]
        out[agent][category] = run
    return out


def _upload(site: dict, work: Path, agent: str):
    """The served client: `metadata` from the jobs, the submitter's review, the upload
    (--no-wait: this process validates and verifies it). Returns the submission."""
    from submissions.models import Submission

    client = work / "hab-submit.py"
    shutil.copy(REPO / "submissions" / "client.py", client)  # the file /client/hab-submit.py serves
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(work)}
    jobs = sorted(str(p) for p in (work / f"jobs-{agent}").iterdir() if p.is_dir())
    meta = work / f"metadata-{agent}.yaml"
    with meta.open("w") as out:
        subprocess.run(["python3", str(client), "metadata", "--benchmark", SLUG, *jobs],  # noqa: S603, S607
                       cwd=work, env=bare, stdout=out, check=True, timeout=120)
    review_metadata(meta, REVIEWED[agent])
    before = set(Submission.objects.values_list("pk", flat=True))
    done = subprocess.run(["python3", str(client), "--url", site["url"], "--token", site["token"],  # noqa: S603, S607
                           "--metadata", str(meta), "--no-wait", *jobs],
                          cwd=work, env=bare, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (sub,) = Submission.objects.exclude(pk__in=before)
    return sub


def _intake(sub) -> str:
    from submissions.intake import submission_intake

    return submission_intake(submission_id=sub.pk)


def _verify(sub):
    from submissions.verification import reap_stuck_submissions, verification_run

    job = sub.verification_jobs.first()
    if job is None:  # the intake's on-commit publish went to a queue nobody reads: reconcile
        reap_stuck_submissions()
        job = sub.verification_jobs.get()
    assert verification_run(job_id=job.pk) == "done"
    sub.refresh_from_db()
    return sub


def _harbor_rewards(runs: dict[str, HarborRun]) -> dict[str, list]:
    out = {}
    for category, run in runs.items():
        assert run.returncode == 0, run.report()
        out[category] = run.rewards()
    return out


@pytest.mark.parametrize("release", ACCEPTED)
def test_a_release_jobs_are_accepted_and_verified_with_harbors_outcomes(release, site, tmp_path):
    env = harbor_environment(None if release == PINNED else release)
    env["PYTHONPATH"] = str(LOCKS)  # where Harbor imports the scripted agent from
    assert subprocess.run(["harbor", "--version"], env=env, text=True,  # noqa: S607
                          capture_output=True, check=True).stdout.strip() == release
    t0 = time.monotonic()
    both = _harbor_loop(release, ("oracle", "wrong"), tmp_path, env)
    figures = {"harbor s (both agents)": round(time.monotonic() - t0, 1)}
    for agent, expected in (("oracle", 1.0), ("wrong", 0.0)):
        rewards = _harbor_rewards(both[agent])
        figures[f"{agent} slowest job s"] = round(max(r.seconds for r in both[agent].values()), 1)
        for category, got in rewards.items():
            # The X-ray verifier has no judge on the submitter's machine: no grade for a pass.
            want = None if (category == XRAY and expected == 1.0) else expected
            assert got == [want] * ATTEMPTS, (release, agent, category, got,
                                              both[agent][category].report()[-4000:])
        for job in (tmp_path / f"jobs-{agent}").iterdir():
            lock = json.loads((job / "lock.json").read_text())
            assert lock["harbor"]["version"] == release
        sub = _upload(site, tmp_path, agent)
        t0 = time.monotonic()
        assert _intake(sub) == "queued", list(sub.problems.values_list("code", "message"))
        sub = _verify(sub)
        figures[f"{agent} verify s"] = round(time.monotonic() - t0, 1)
        trials = list(sub.trials.select_related("benchmark_task"))
        assert len(trials) == 7 * ATTEMPTS
        assert {t.verified_reward for t in trials} == {expected}, [
            (t.benchmark_task.name, t.reward, t.verified_reward) for t in trials]
        assert sub.coverage["verdict"] in ("verified", "consistent"), (
            sub.status, sub.status_reason, sub.coverage)
        # The oracle is a reference run on a try-out version: the site publishes it, unranked.
        assert sub.status == ("published" if sub.is_reference else sub.coverage["verdict"]), (
            sub.status, sub.is_reference)
        figures[f"{agent} verdict"] = sub.coverage["verdict"]
    print(f"\nHarbor {release}: {figures}")


@pytest.mark.parametrize("release", REFUSED)
def test_a_release_the_site_cannot_take_is_refused_naming_the_accepted(release, site, tmp_path):
    env = harbor_environment(release)
    runs = _harbor_loop(release, ("oracle",), tmp_path, env)["oracle"]
    for run in runs.values():
        assert not (run.job_dir / "lock.json").exists(), run.report()
        if run.job_dir.name == XRAY:  # no judge here: no reward.json, nothing for the metric
            continue
        # Why 0.1.45 cannot run these tasks, on Harbor's own output: its mean metric refuses the
        # verifiers' reward.json (the reward and its sub-scores), and the job has no result.json.
        assert "Expected exactly one key in reward dictionary" in run.output, run.report()
        assert not (run.job_dir / "result.json").exists(), run.report()
    sub = _upload(site, tmp_path, "oracle")
    assert _intake(sub) == "refused"
    problems = list(sub.problems.filter(code="harbor_release_unsupported"))
    assert sorted(p.path for p in problems) == sorted(f"{c}/lock.json" for c in _categories())
    message = problems[0].message
    assert "Harbor 0.1.45, the last 0.1.x, cannot run these tasks" in message
    assert f"Harbor {OLDEST_ACCEPTED_HARBOR} or later (tested: " \
           f"{', '.join(TESTED_HARBOR_RELEASES)})" in message
