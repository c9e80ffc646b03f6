"""The newcomer's whole journey on a fresh site, in a real browser.

A site with nothing but what `make run` registers (sync_tasks) and a maintainer account. A
logged-out visitor opens "Submit" from the navigation and copies the page's `harbor run`
loop; the test runs it with the REAL Harbor CLI (.venv-harbor) and Harbor's oracle agent over
every category of healthagentbench-synthetic@1.0 (7 tasks x 1 attempt; the page exports no
judge, so the X-ray verifier records no grade, and the worker grades those trials with the
site's judge: the project's synthetic judge, served by `manage.py serve_synthetic_judge` as
`make run` serves it, not the tests' stand-in), archives the job directories with the page's `tar` command,
signs up, creates an API token on the account page, uploads the archive through the form, and
follows the live status page until the verdict given by a REAL Celery worker verifying in
Docker. The oracle is one of the site's own agents, so on this try-out version its run is a
labelled reference run: the status page, its verdict and the API say "reference run", with no
model. The token reads the same status from the API. With its verdict the site publishes it
itself (a try-out's reference run, never ranked): the try-out ends in a row of the synthetic
leaderboard, listed apart from the ranked table as a reference run.

The site's version asks for ATTEMPTS (1) attempt per task here, not the package's 3: the page
renders `-k {{ attempts_per_task }}` from the version and intake and the leaderboard count against
it, so the journey proves the same commands at a third of the trials (each category's package,
grader and verifier still run under Harbor and again on the worker; submissions of 3 attempts
per task are verified by the worker in tests/evaluation/test_verification.py).
The page's loop runs its seven `harbor run` jobs side by side (each line sent to the
background, then `wait`). Needs PostgreSQL (the worker shares the test database), Docker and
Debian's chromium.
"""

import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from django.core.management import call_command

from tests.evaluation import verification_support as vs
from tests.harbor_cli import HarborRun, harbor_environment, review_metadata, run_all
from tests.accounts_support import browser_sign_up
from tests.leaderboard.test_browser import chromium

pytestmark = [pytest.mark.browser, pytest.mark.docker, pytest.mark.django_db(transaction=True)]

SLUG = "healthagentbench-synthetic@1.0"
HARBOR_TIMEOUT_S = float(os.environ.get("HARBOR_RUN_TIMEOUT_S", "480")) * 2
VERDICT_TIMEOUT_S = 1500
ATTEMPTS = 1  # per task, set on the registered version (see the module's docstring)
TERMINAL = ("verified", "consistent", "discrepancy", "failed", "published")
AGENT_NAME = "Oracle (reference solutions)"
METADATA = {
    "agent_url": "https://github.com/harbor-framework/harbor",
    "agent_display_name": AGENT_NAME,
    "agent_org_display_name": "Harbor",
    "models": [{"model_name": "none", "model_provider": "none",
                "model_display_name": "no model", "model_org_display_name": "none"}],
    "harness": "oracle",
    "harness_version": "1.0.0",
    "benchmark": SLUG,
    "notes": "Harbor's oracle agent: the task packages' own solution/solve.sh.",
}


@pytest.fixture
def fresh_site(live_server, settings, tmp_path, docker_engine):
    """What `make run` serves (the task sources registered, the synthetic judge started by its
    own command and the site pointed at it as scripts/run-dev does), one maintainer, and a real
    worker on the evaluation queue sharing the test database and the media folder."""
    from django.contrib.auth import get_user_model

    from config.celery import app

    vs.shared_database_url()  # skips on SQLite, which a worker process cannot share
    media = tmp_path / "media"
    settings.MEDIA_ROOT = str(media)
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    call_command("sync_tasks", verbosity=0)
    from evaluation.models import BenchmarkVersion

    name, version = SLUG.split("@")
    assert BenchmarkVersion.objects.filter(name=name, version=version).update(
        attempts_per_task=ATTEMPTS) == 1
    get_user_model().objects.create_user("maint", "m@example.org", "pw-maint-123!",
                                         is_staff=True)
    judge_env, judge = _serve_synthetic_judge(tmp_path)
    settings.XRAY_JUDGE_URL = judge_env["XRAY_JUDGE_URL"]
    settings.XRAY_JUDGE_MODEL = judge_env["XRAY_JUDGE_MODEL"]
    try:
        worker = vs.Worker(media_root=media, queue=f"{vs.QUEUE}-journey",
                           env={"VERIFICATION_RERUN_FIRST_TASKS": "1", "VERIFICATION_RERUN_MAX_TRIALS": "1",
                                **judge_env}).start()
    except BaseException:
        judge.terminate()
        raise
    settings.VERIFICATION_QUEUE = worker.queue
    settings.INTAKE_QUEUE = worker.queue  # the same worker validates the upload first
    broker = app.conf.broker_url
    vs.point_celery_at(vs.BROKER_URL)
    try:
        yield live_server.url, worker
    finally:
        worker.stop()
        judge.terminate()
        judge.wait(timeout=30)
        vs.redis_client().delete(worker.queue)
        vs.point_celery_at(broker)


def _serve_synthetic_judge(tmp_path):
    """`manage.py serve_synthetic_judge --env-file`, as scripts/run-dev starts it (DEBUG, no
    judge configured): the variables it writes, and its process."""
    env_file = tmp_path / "synthetic-judge.env"
    env = {**os.environ, "DEBUG": "1", "XRAY_JUDGE_URL": "", "PYTHONUNBUFFERED": "1"}
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen([sys.executable, "manage.py", "serve_synthetic_judge",  # noqa: S603
                             "--env-file", str(env_file)], cwd=vs.REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    if not env_file.exists():
        proc.terminate()
        raise AssertionError(f"the synthetic judge did not start: {line}{proc.stdout.read()}")
    return dict(v.split("=", 1) for v in env_file.read_text().splitlines()), proc


def _run_page_loop(command: str, work):
    """The Submit page's loop with Harbor's oracle as the agent, its jobs side by side."""
    assert "-a <your agent> -m <provider/model>" in command, command
    assert command.rstrip().endswith("-y\ndone"), command
    script = (command.replace("-a <your agent> -m <provider/model>", "-a oracle")
              .rstrip()[: -len("done")].rstrip()[: -len("-y")] + "-y -q &\ndone\nwait\n")
    (work / "tasks").symlink_to(vs.REPO / "tasks")  # the page's paths are the repository's
    # The judge is the page's first line's (nothing of the test's own environment).
    env = {k: v for k, v in harbor_environment().items() if not k.startswith("XRAY_JUDGE")}
    run = run_all({"submit-page-loop": (["bash", "-euc", script], work / "jobs")},
                  cwd=work, env=env, timeout_s=HARBOR_TIMEOUT_S)["submit-page-loop"]
    assert run.returncode == 0, run.output[-6000:]
    jobs = sorted(p for p in (work / "jobs").iterdir() if p.is_dir())
    loop = command[command.index("for dir in"):]
    assert [j.name for j in jobs] == sorted("-".join(c.split("/")[-2:]) for c in
                                            loop.split("; do")[0].split()[3:]), run.output
    rewards = {}
    for job in jobs:
        job_run = HarborRun(name=job.name, cmd=run.cmd, returncode=0, output="",
                            seconds=run.seconds, job_dir=job)
        rewards[job.name] = job_run.rewards()
        # The X-ray verifier has no judge on the submitter's machine: no grade, no reward.
        expected = None if job.name.startswith("xray-report-correction-") else 1.0
        assert rewards[job.name] == [expected] * ATTEMPTS, job_run.report()
    return run


def _metadata_with_the_served_client(page, work):
    """The page's download and metadata lines: the client fetched from the site (its sha256 the
    one the page shows), run by the machine's own python3 (no Django, nothing cloned) on the
    Harbor jobs; the submitter's review replaces its TODO lines."""
    download = page.locator('[data-testid="client-download"]').inner_text().splitlines()
    url = download[0].removeprefix("curl -O ")
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - live server
        (work / "hab-submit.py").write_bytes(response.read())
    digest = hashlib.sha256((work / "hab-submit.py").read_bytes()).hexdigest()
    assert download[1].endswith(f"# {digest}"), download
    command = download[2]
    assert command.startswith("python3 hab-submit.py metadata --benchmark ") and \
        command.endswith(" > metadata.yaml"), command
    subprocess.run(["bash", "-c", command], cwd=work, check=True,  # noqa: S603 - the page's
                   env={"PATH": "/usr/bin:/bin"})
    text = (work / "metadata.yaml").read_text()
    assert 'harness: "oracle"' in text and 'harness_version: "1.0.0"' in text, text
    assert f'benchmark: "{SLUG}"' in text and "model_name: none" in text, text
    review_metadata(work / "metadata.yaml", {
        "agent_display_name": AGENT_NAME, "agent_url": METADATA["agent_url"],
        "agent_org_display_name": METADATA["agent_org_display_name"]})


def test_visitor_submits_a_real_harbor_run_which_reaches_a_verdict_as_a_reference_run(
        fresh_site, tmp_path):
    base, worker = fresh_site
    work = tmp_path / "work"
    work.mkdir()
    timings = {}
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        problems = []
        page.on("pageerror", lambda e: problems.append(str(e)))

        # A logged-out visitor finds Submit in the navigation and copies the Harbor loop.
        page.goto(base + "/")
        page.get_by_role("navigation", name="Leaderboard pages").get_by_role(
            "link", name="Submit").click()
        page.wait_for_url("**/submit/")
        command = page.locator('[data-testid="harbor-command"]').inner_text()

        # No judge to export: the X-ray trials end with no grade, which the site grades itself.
        assert "XRAY_JUDGE" not in command and command.startswith("for dir in"), command
        assert "No judge of your own is needed" in page.locator(
            '[data-testid="judge-note"]').inner_text()
        t0 = time.monotonic()
        _run_page_loop(command, work)
        timings["harbor"] = time.monotonic() - t0
        tar = page.locator("pre", has_text="tar czf run.tar.gz").inner_text().splitlines()[0]
        assert tar == "tar czf run.tar.gz -C jobs ."
        subprocess.run(tar.split(), cwd=work, check=True)  # noqa: S603 - the page's command
        _metadata_with_the_served_client(page, work)

        # Sign up from the guide, then create a token on the account page.
        page.locator('[data-testid="submit-guide"]').get_by_role("link", name="Sign up").click()
        # The address is confirmed by the link in the e-mail, which signs the account in.
        browser_sign_up(page, base, "newcomer", path="")
        page.wait_for_url("**/account/")
        page.click("text=Create token")
        token = page.locator("#new-token").inner_text()
        assert token.startswith("hab_")

        # Upload through the form; the status page follows verification live.
        page.get_by_role("navigation", name="Leaderboard pages").get_by_role(
            "link", name="Submit").click()
        page.set_input_files("#id_archive", str(work / "run.tar.gz"))
        page.set_input_files("#id_metadata", str(work / "metadata.yaml"))
        page.click('[data-testid="upload-form"] button[type=submit]')
        page.wait_for_url("**/submissions/*/")
        # Received at once; the page follows the worker's validation, then shows the trials.
        page.locator('[data-testid="intake"]').wait_for(state="detached", timeout=180_000)
        assert page.locator('[data-testid="problems"]').count() == 0
        status_url = page.url
        pk = int(status_url.rstrip("/").rsplit("/", 1)[1])
        assert f"-k {ATTEMPTS} " in command, command
        assert page.locator('[data-testid="trials"] tbody tr').count() == 7 * ATTEMPTS
        t0 = time.monotonic()
        try:
            page.wait_for_function(
                "terminal => terminal.includes("
                "document.querySelector('[data-field=status]').textContent.trim())",
                arg=list(TERMINAL), timeout=VERDICT_TIMEOUT_S * 1000, polling=2000)
        except Exception as exc:  # noqa: BLE001 - say what the worker did
            raise AssertionError(f"no verdict on the status page: {exc}\n{worker.tail()}") from exc
        timings["verification"] = time.monotonic() - t0
        # With a verdict of verified or consistent the site publishes the try-out itself.
        page.locator('[data-field="status"]').filter(has_text="published").wait_for(
            timeout=30_000)
        page.reload()
        verdict = page.locator('[data-field="verdict"]').inner_text()
        assert verdict in ("verified", "consistent"), (verdict, worker.tail())
        # The oracle's run on the try-out version: a labelled reference run, with no model.
        label = page.locator('[data-testid="reference-run"]').inner_text()
        assert label.startswith("reference run, no model: oracle,"), label
        assert "never ranked" in label
        # The X-ray grade is labelled as the synthetic judge's, in the verdict and on the trial.
        page.reload()
        verification = page.locator('[data-testid="verification"]').inner_text()
        assert "X-ray graded by the synthetic judge (a rule, not an LLM)" in verification
        assert "verdict (reference run): " in verification, verification
        assert page.locator('[data-testid="trials"] [data-testid="synthetic-judge"]').count() \
            == ATTEMPTS
        # ...and as claiming no grade: the submitter's verifier had no judge.
        assert page.locator('[data-testid="trials"] [data-testid="no-claimed-grade"]').count() \
            == ATTEMPTS
        done = f"{7 * ATTEMPTS}/{7 * ATTEMPTS}"
        assert page.locator('[data-field="progress"]').inner_text() == done
        # The token reads the same status from the API.
        request = urllib.request.Request(f"{base}/api/v1/submissions/{pk}/",
                                         headers={"Authorization": f"Token {token}"})
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - live server
            doc = json.load(response)
        assert (doc["status"], doc["reference"], doc["kind"], doc["model"]) == (
            "published", True, "reference run", "reference run, no model")
        assert doc["coverage"]["verdict"] == verdict

        # The try-out ends in a row: on the synthetic leaderboard, listed apart from the ranked
        # table as a reference run, with the site's verdict as the reason.
        page.goto(f"{base}/?benchmark={SLUG}")
        assert page.locator('[data-testid="leaderboard-table"] tbody tr',
                            has_text=AGENT_NAME).count() == 0
        row = page.locator('[data-testid="unranked-row"]', has_text=AGENT_NAME)
        assert row.count() == 1
        shown = row.inner_text()
        assert "reference" in shown and f"reference run (not ranked): {verdict}" in shown, shown
        assert "100.0%" in shown, shown
        assert problems == []
    # (The ORM after the browser: Playwright's sync API runs an event loop in this thread.)
    from leaderboard.models import LeaderboardEntry
    from submissions.models import Submission

    sub = Submission.objects.get(pk=pk)
    trials = 7 * ATTEMPTS
    assert sub.owner.username == "newcomer"
    assert sub.is_reference and sub.status == "published" and sub.published_at is not None
    assert sub.events.filter(to_status="published", actor=None).count() == 1
    assert sub.agent.model.display_name == "reference run, no model"
    assert sub.trials.filter(verified_reward=1.0).count() == trials
    # The X-ray trials claimed no grade (no judge on the submitter's machine) and were graded
    # by the site's judge alone: not an infrastructure error, not re-attempted.
    xray = sub.trials.filter(benchmark_task__category__slug="xray-report-correction")
    assert [(t.claimed_outcome, t.outcome) for t in xray] == [("infra_error", "passed")] * ATTEMPTS
    assert all("no_claimed_grade" in t.flags and "infra_unconfirmed" not in t.flags
               for t in xray), [t.flags for t in xray]
    assert not xray.filter(infra_confirmed=True).exists()
    entry = LeaderboardEntry.objects.get(submission=sub)
    assert (entry.verification_level, entry.ranked) == ("reference", False)
    print(f"harbor (7 jobs x {ATTEMPTS} oracle trial(s)): {timings['harbor']:.0f} s; "
          f"verification to the verdict ({verdict}): {timings['verification']:.0f} s")
