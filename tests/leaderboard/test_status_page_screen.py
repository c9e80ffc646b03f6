"""The submission page states only what the site found. Its reward-hacking section says "none
tripped a rule" only after the screen ran (with how many passes it screened), and says why
it did not run otherwise (reconstructed, refused, verification not finished). A refused upload's
page does not claim "no infrastructure error reported" beside a refusal for too many of them:
nothing of it was kept, and the page says so (found walking the Submit page's oracle try-out)."""

import pytest

from submissions.models import (
    CheckKind,
    CheckStatus,
    SubmissionStatus,
    TrialCheck,
    ValidationProblem,
    VerificationJob,
)
from tests.factories import AgentFactory, SubmissionFactory, published_submission

pytestmark = pytest.mark.django_db
NONE_TRIPPED = "none tripped a rule"


def _screen_text(client, sub) -> str:
    response = client.get(f"/submissions/{sub.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    start = html.index('data-testid="screen-findings"')
    return html[start:html.index("</section>", start)], html


def test_reconstructed_submission_is_not_called_screened(small_benchmark, client):
    _bv, tasks = small_benchmark
    sub = published_submission(AgentFactory(), tasks, ["PPP"] * 5, is_reconstructed=True)
    screen, _ = _screen_text(client, sub)
    assert NONE_TRIPPED not in screen and "tripped" not in screen
    assert "Not screened: reconstructed from the paper's published aggregates" in screen


def test_screened_submission_says_how_many_passes_were_screened(small_benchmark, client):
    _bv, tasks = small_benchmark
    sub = published_submission(AgentFactory(), tasks, ["PPF", "FFF", "PFF", "FFF", "FFF"])
    job = VerificationJob.objects.create(submission=sub, status="done", attempt=1)
    for trial in sub.trials.filter(success=True):
        TrialCheck.objects.create(job=job, kind=CheckKind.SCREEN, trial=trial,
                                  benchmark_task=trial.benchmark_task,
                                  status=CheckStatus.MATCH)
    screen, _ = _screen_text(client, sub)
    assert "The site screened 3 counted passes of this submission" in screen
    assert NONE_TRIPPED in screen


def test_submission_in_verification_is_not_yet_screened(small_benchmark, client,
                                                         django_user_model):
    _bv, tasks = small_benchmark
    owner = django_user_model.objects.create_user("submitter", password="pw-submitter-123!")
    sub = published_submission(AgentFactory(), tasks, ["PPP"] * 5, owner=owner,
                               status=SubmissionStatus.VERIFYING, published_at=None)
    client.force_login(owner)
    screen, _ = _screen_text(client, sub)
    assert NONE_TRIPPED not in screen
    assert "Not screened: the screen runs on every counted pass during verification" in screen


def test_refused_upload_page_keeps_no_claims(small_benchmark, client, django_user_model):
    bv, _tasks = small_benchmark
    owner = django_user_model.objects.create_user("newcomer", password="pw-newcomer-123!")
    sub = SubmissionFactory(benchmark_version=bv, agent=None, owner=owner,
                            status=SubmissionStatus.REFUSED, published_at=None,
                            status_reason="1 problem(s) in the upload; see the list below")
    ValidationProblem.objects.create(
        submission=sub, code="infra_errors_too_many", path="xray-report-correction",
        message="3 of 21 trials (14%) ended in an infrastructure error")
    client.force_login(owner)
    screen, html = _screen_text(client, sub)
    assert "Not screened: the upload was refused and nothing of it was kept" in screen
    assert NONE_TRIPPED not in screen
    assert "infra_errors_too_many" in html  # the owner sees the problem...
    # ...and no section beside it contradicting it with an empty list of claims.
    assert "reports no trial as an infrastructure error" not in html
    assert 'data-testid="no-trials-kept"' in html and "No trials." not in html


def test_job_line_counts_replays_tried_not_replayed(small_benchmark, client):
    """Walked on `make run` with Harbor's oracle (no trajectory): the job line said "replayed 21"
    beside the badge's "replayed 0/21". It counts the replay checks the job ran, so it says
    "replays tried"; what reproduced is the badge's count."""
    _bv, tasks = small_benchmark
    sub = published_submission(AgentFactory(), tasks, ["PPP"] * 5)
    job = VerificationJob.objects.create(submission=sub, status="done", attempt=1,
                                         verdict="consistent")
    for trial in sub.trials.all():
        TrialCheck.objects.create(job=job, kind=CheckKind.REPLAY, trial=trial,
                                  benchmark_task=trial.benchmark_task,
                                  status=CheckStatus.NOT_REPLAYABLE, flags=["not_replayable"])
    html = client.get(f"/submissions/{sub.pk}/").content.decode()
    line = html.split('data-testid="verification">')[1].split("</dd>")[0]
    assert 'replays tried <span data-field="replayed">15</span>' in line
    assert 're-run trials <span data-field="rerun">0</span>' in line
    assert "replayed <span" not in line
