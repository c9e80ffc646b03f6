"""Browser walk (Playwright + Debian's chromium): sign up, create a token, upload a Harbor run
through the form, land on the live status page."""

import tarfile

import pytest
import yaml
from django.core.management import call_command
from playwright.sync_api import expect

from tests.conftest import TEST_OUTPUT
from tests.accounts_support import browser_sign_up
from tests.leaderboard.test_browser import chromium
from devtools.harbor_fixtures import HarborJobBuilder, build_metadata

pytestmark = pytest.mark.browser


@pytest.fixture
def site(live_server, transactional_db, settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    call_command("sync_tasks", verbosity=0)
    return live_server.url


def _files(tmp_path, agent="codex"):
    from evaluation.models import BenchmarkVersion

    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    root = tmp_path / "run"
    job = HarborJobBuilder({t.name: t.content_digest for t in bv.tasks.all()}, agent=agent,
                           model=None if agent == "oracle" else "openai/gpt-5.5").build(root)
    if agent == "oracle":  # Harbor's oracle writes agent/oracle.txt and no trajectory
        for trial in job.all_trials():
            (trial / "agent" / "trajectory.json").unlink()
    archive = tmp_path / "run.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
    meta = tmp_path / "metadata.yaml"
    meta.write_text(yaml.safe_dump(build_metadata() if agent != "oracle" else build_metadata(
        agent_display_name="Oracle (reference solutions)", agent_org_display_name="Harbor",
        agent_url="https://github.com/harbor-framework/harbor", harness="oracle",
        harness_version="1.0.0", models=[{
            "model_name": "none", "model_provider": "none", "model_display_name": "no model",
            "model_org_display_name": "none"}])))
    return archive, meta


def _intake_in_a_thread(pk: int) -> str:
    """The intake worker's service, off Playwright's thread (its event loop makes Django refuse
    database calls there)."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from submissions.intake import submission_intake

    def run() -> str:
        try:
            return submission_intake(submission_id=pk)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


def test_sign_up_token_upload_and_status_page(site, tmp_path):
    archive, meta = _files(tmp_path)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        problems = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        browser_sign_up(page, site, "alice")  # confirmed by the e-mail's link
        page.wait_for_url("**/account/")
        page.click("text=Create token")
        token = page.locator("#new-token").inner_text()
        assert token.startswith("hab_")
        page.goto(site + "/submit/")
        page.set_input_files("#id_archive", str(archive))
        page.set_input_files("#id_metadata", str(meta))
        page.click('[data-testid="upload-form"] button[type=submit]')
        page.wait_for_url("**/submissions/*/")
        # Received at once; the page follows the validation (here the intake worker's service
        # runs from the test), then reloads itself with the verdict.
        assert page.locator('[data-field="status"]').inner_text() == "received"
        assert "waiting for a validator" in page.locator('[data-testid="intake"]').inner_text()
        pk = int(page.url.rstrip("/").rsplit("/", 1)[-1])
        assert _intake_in_a_thread(pk) == "queued"
        page.locator('[data-field="status"]').filter(has_text="queued").wait_for(timeout=15000)
        assert page.locator('[data-testid="intake"]').count() == 0
        assert page.locator('[data-testid="trials"] tbody tr').count() == 21
        page.wait_for_timeout(3500)  # one live poll of the status JSON
        assert page.locator('[data-field="progress"]').inner_text() == "0/21"
        TEST_OUTPUT.mkdir(exist_ok=True)
        page.screenshot(path=str(TEST_OUTPUT / "submission-status.png"), full_page=True)
        assert problems == []


def test_the_try_outs_oracle_upload_lands_on_a_status_page_labelled_reference_run(site,
                                                                                  tmp_path):
    """The Submit page's try-out (Harbor's oracle on the synthetic version) through the form:
    accepted as a reference run, and its status page says so and that the site will publish it
    unranked."""
    archive, meta = _files(tmp_path, agent="oracle")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1300, "height": 900})
        problems = []
        page.on("pageerror", lambda e: problems.append(str(e)))
        browser_sign_up(page, site, "trier")  # confirmed by the e-mail's link
        page.wait_for_url("**/account/")
        page.goto(site + "/submit/")
        tryout = page.locator('[data-testid="oracle-tryout"]').inner_text()
        assert "accepted as a reference run" in tryout and "never ranked" in tryout, tryout
        page.set_input_files("#id_archive", str(archive))
        page.set_input_files("#id_metadata", str(meta))
        page.click('[data-testid="upload-form"] button[type=submit]')
        page.wait_for_url("**/submissions/*/")
        pk = int(page.url.rstrip("/").rsplit("/", 1)[-1])
        assert _intake_in_a_thread(pk) == "queued"
        page.locator('[data-field="status"]').filter(has_text="queued").wait_for(timeout=15000)
        label = page.locator('[data-testid="reference-run"]').inner_text()
        assert label.startswith("reference run, no model: oracle, "), label
        assert ("never ranked: on this try-out version the site publishes it itself, as an "
                "unranked row, when its verdict is verified or consistent") in label, label
        assert page.locator('[data-testid="trials"] tbody tr').count() == 21
        assert problems == []


def _in_another_thread(fn):
    """The ORM outside Playwright's event loop (its sync API runs one in this thread)."""
    import threading

    from django.db import connection

    errors = []

    def run():
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - raised again in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def test_the_open_status_page_follows_each_step_to_the_verdict(site, tmp_path):
    """Opened while queued and never reloaded by hand, the status page shows the job start, its
    checks counting up, then the verdict (once, not "consistent: consistent: ...") and the history
    line, as the worker writes them (they once stayed as they were when the page opened)."""
    from submissions.models import JobStatus, Submission, SubmissionStatus, TrialCheck
    from submissions.states import submission_transition

    archive, meta = _files(tmp_path)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        problems = []
        page.on("pageerror", lambda e: problems.append(str(e)))
        browser_sign_up(page, site, "bob")  # confirmed by the e-mail's link
        page.wait_for_url("**/account/")
        page.goto(site + "/submit/")
        page.set_input_files("#id_archive", str(archive))
        page.set_input_files("#id_metadata", str(meta))
        page.click('[data-testid="upload-form"] button[type=submit]')
        page.wait_for_url("**/submissions/*/")
        pk = int(page.url.rstrip("/").rsplit("/", 1)[1])
        assert page.locator('[data-field="status"]').inner_text() == "received"
        assert _intake_in_a_thread(pk) == "queued"  # the intake worker's service
        expect(page.locator('[data-field="job-status"]')).to_have_text("pending", timeout=15000)

        def start():
            sub = Submission.objects.get(pk=pk)
            sub.verification_jobs.update(status=JobStatus.RUNNING, attempt=1)
            submission_transition(submission=sub, to_status=SubmissionStatus.VERIFYING,
                                  note="verification job started")

        _in_another_thread(start)
        expect(page.locator('[data-field="job-status"]')).to_have_text("running", timeout=15000)
        assert page.locator('[data-field="status"]').inner_text() == "verifying"
        assert "verification job started" in page.locator('[data-testid="events"]').inner_text()

        def regrade_two():
            sub = Submission.objects.get(pk=pk)
            job = sub.verification_jobs.get()
            for trial in sub.trials.order_by("pk")[:2]:
                TrialCheck.objects.create(job=job, trial=trial, kind="regrade", status="match",
                                          benchmark_task=trial.benchmark_task,
                                          claimed_reward=1.0, verified_reward=1.0)
            Submission.objects.filter(pk=pk).update(trials_done=2)

        _in_another_thread(regrade_two)
        expect(page.locator('[data-field="regraded"]')).to_have_text("2", timeout=15000)
        assert page.locator('[data-field="progress"]').inner_text() == "2/21"

        def verdict():
            sub = Submission.objects.get(pk=pk)
            sub.verification_jobs.update(status=JobStatus.DONE, verdict="consistent", summary={
                "headline": "consistent: 21/21 re-grades match"})
            submission_transition(submission=sub, to_status=SubmissionStatus.CONSISTENT,
                                  note="consistent: 21/21 re-grades match")

        _in_another_thread(verdict)
        expect(page.locator('[data-field="job-status"]')).to_have_text("done", timeout=15000)
        text = page.locator('[data-testid="verification"]').inner_text()
        assert "verdict: consistent: 21/21 re-grades match" in text, text
        assert "consistent: consistent" not in text
        assert "verifying → consistent" in page.locator('[data-testid="events"]').inner_text()
        assert problems == []
