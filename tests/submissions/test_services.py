"""Tokens, the daily quota, and the status state machine."""

import threading
from datetime import date

import pytest
from django.db import connection

from submissions import services
from submissions.models import DailyQuota, Submission, SubmissionEvent, SubmissionStatus


def test_issued_token_authenticates_and_revoked_token_does_not(owner):
    token, raw = services.token_issue(user=owner, name="cli")
    assert raw.startswith(f"hab_{token.prefix}_")
    assert token.key_sha256 != raw and raw not in token.key_sha256
    assert services.token_authenticate(raw=raw) == owner
    assert services.token_authenticate(raw=raw + "x") is None
    assert services.token_revoke(user=owner, token_id=token.pk)
    assert services.token_authenticate(raw=raw) is None


def test_a_user_cannot_revoke_someone_elses_token(owner, stranger):
    token, _ = services.token_issue(user=owner)
    assert not services.token_revoke(user=stranger, token_id=token.pk)


def test_token_names_are_unique_among_a_users_active_tokens(owner, stranger):
    first, _ = services.token_issue(user=owner, name="cli")
    with pytest.raises(services.TokenNameTaken, match="already have a token named 'cli'"):
        services.token_issue(user=owner, name="cli")
    assert services.token_issue(user=stranger, name="cli")[0].name == "cli"  # per user
    # Unnamed tokens take the first free name; a revoked token frees its name.
    assert services.token_issue(user=owner, base="cli")[0].name == "cli-2"
    assert services.token_issue(user=owner)[0].name == "default"
    assert services.token_issue(user=owner)[0].name == "default-2"
    services.token_revoke(user=owner, token_id=first.pk)
    assert services.token_issue(user=owner, name="cli")[0].name == "cli"


def test_the_account_page_gives_a_copy_button_and_a_usage_snippet(owner, client):
    client.force_login(owner)
    services.token_issue(user=owner, name="cli")
    page = client.get("/account/").content.decode()
    assert 'value="cli-2"' in page  # the form suggests a free name
    response = client.post("/account/tokens/", {"name": "cli"}, follow=True)
    assert "already have a token named" in response.content.decode()
    response = client.post("/account/tokens/", {"name": "laptop"}, follow=True)
    body = response.content.decode()
    raw = body.split('<code id="new-token">')[1].split("</code>")[0]
    assert services.token_authenticate(raw=raw) == owner
    assert 'data-copy="#new-token"' in body and "/static/submissions/js/copy.js" in body
    usage = body.split('data-testid="token-usage">')[1].split("</pre>")[0]
    assert f"export HAB_TOKEN={raw}" in usage
    assert "curl -O http://testserver/client/hab-submit.py" in usage
    assert "python3 hab-submit.py --url http://testserver" in usage
    assert "http://testserver/api/v1/submissions/" in usage
    # shown once
    assert raw not in client.get("/account/").content.decode()


def test_the_account_pages_commands_are_the_submit_pages(owner, client):
    """The token snippet runs as typed after the Submit page's loop: it uploads every job
    directory the loop wrote (one per category, jobs/*/) and archives them before curl uses
    run.tar.gz (it once named a single "<your job directory>" and curled an archive it never
    made)."""
    import html

    from django.core.management import call_command

    call_command("sync_tasks", verbosity=0)
    client.force_login(owner)
    body = client.post("/account/tokens/", {"name": "laptop"}, follow=True).content.decode()
    usage = html.unescape(body.split('data-testid="token-usage">')[1].split("</pre>")[0])
    lines = [line for line in usage.splitlines() if not line.startswith(("#", "export "))]
    submit = html.unescape(client.get("/submit/").content.decode())
    for line in lines:
        assert line in submit, line
    assert "<" not in usage  # no placeholder left to fill in
    tar = next(i for i, line in enumerate(lines) if line.startswith("tar czf run.tar.gz"))
    curl = next(i for i, line in enumerate(lines) if line.startswith("curl -H"))
    assert tar < curl


def test_quota_allows_exactly_the_daily_limit(owner, settings):
    settings.SUBMISSION_DAILY_QUOTA = 2
    day = date(2026, 12, 2)
    assert services.quota_consume(user=owner, today=day) == 1
    assert services.quota_consume(user=owner, today=day) == 2
    with pytest.raises(services.QuotaExceeded):
        services.quota_consume(user=owner, today=day)
    assert services.quota_consume(user=owner, today=date(2026, 12, 3)) == 1


def test_maintainers_have_no_quota(maintainer, settings):
    settings.SUBMISSION_DAILY_QUOTA = 0
    assert services.quota_consume(user=maintainer) == 0


@pytest.mark.django_db(transaction=True)
def test_parallel_quota_takes_exactly_the_limit(settings):
    """A10: 20 parallel takers against a quota of 5 -> exactly 5 succeed (real concurrency)."""
    from django.contrib.auth import get_user_model

    settings.SUBMISSION_DAILY_QUOTA = 5
    user = get_user_model().objects.create_user("racer")
    results: list[str] = []
    barrier = threading.Barrier(20)

    def take():
        barrier.wait()
        try:
            services.quota_consume(user=user)
            results.append("ok")
        except services.QuotaExceeded:
            results.append("quota")
        finally:
            connection.close()

    threads = [threading.Thread(target=take) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("ok") == 5 and results.count("quota") == 15
    assert DailyQuota.objects.get(user=user).used == 5


def test_transitions_follow_the_state_machine_and_are_audited(owned_submission, maintainer):
    sub = services.submission_transition(submission=owned_submission,
                                         to_status=SubmissionStatus.VERIFYING, actor=None)
    assert sub.status == SubmissionStatus.VERIFYING
    with pytest.raises(services.InvalidTransition):
        services.submission_transition(submission=sub, to_status=SubmissionStatus.QUEUED)
    services.submission_transition(submission=sub, to_status=SubmissionStatus.VERIFIED)
    services.submission_publish(submission=sub, actor=maintainer)
    sub.refresh_from_db()
    assert sub.status == SubmissionStatus.PUBLISHED and sub.published_at is not None
    events = list(SubmissionEvent.objects.filter(submission=sub).values_list(
        "from_status", "to_status"))
    assert events == [("queued", "verifying"), ("verifying", "verified"),
                      ("verified", "published")]
    with pytest.raises(services.InvalidTransition):
        services.submission_transition(submission=sub, to_status=SubmissionStatus.QUEUED)


def _verify(sub):
    """The transitions the verification pipeline makes (tested for real in tests/evaluation)."""
    services.submission_transition(submission=sub, to_status=SubmissionStatus.VERIFYING)
    return services.submission_transition(submission=sub, to_status=SubmissionStatus.VERIFIED)


def test_a_queued_submission_cannot_be_published_before_verification(owned_submission,
                                                                      maintainer):
    with pytest.raises(services.InvalidTransition):
        services.submission_publish(submission=owned_submission, actor=maintainer)


def test_publishing_updates_the_leaderboard_in_the_same_transaction(owned_submission, maintainer):
    from leaderboard.models import LeaderboardEntry

    _verify(owned_submission)
    services.submission_publish(submission=owned_submission, actor=maintainer)
    entry = LeaderboardEntry.objects.get(submission=owned_submission)
    assert (entry.successes, entry.attempts) == (1, 1)
    services.submission_withdraw(submission=owned_submission, actor=maintainer, reason="fraud")
    assert not LeaderboardEntry.objects.filter(submission=owned_submission).exists()


def test_rejection_needs_a_reason_and_is_final(owned_submission, maintainer):
    with pytest.raises(services.SubmissionError):
        services.submission_reject(submission=owned_submission, actor=maintainer, reason=" ")
    sub = services.submission_reject(submission=owned_submission, actor=maintainer,
                                     reason="duplicate")
    assert sub.is_final and sub.status_reason == "duplicate"
    assert Submission.objects.get(pk=sub.pk).status == SubmissionStatus.REJECTED


def test_the_sweeper_removes_abandoned_staging_but_not_fresh_uploads(tmp_path, settings):
    """U12: an upload dropped half-way leaves a staging folder and a partial temp file; the
    periodic sweep removes them once stale, and leaves fresh ones alone."""
    import os
    import time

    from submissions.tasks import sweep_staging_task

    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "staging" / "incoming")
    old = tmp_path / "staging" / "staging-old"
    (old / "tree").mkdir(parents=True)
    (old / "tree" / "half.json").write_text("{")
    partial = tmp_path / "staging" / "incoming" / "abc.upload.tar.gz"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"\0" * 100)
    fresh = tmp_path / "staging" / "staging-fresh"
    fresh.mkdir()
    long_ago = time.time() - 7 * 3600
    for p in (old, old / "tree", old / "tree" / "half.json", partial):
        os.utime(p, (long_ago, long_ago))
    assert sweep_staging_task() == 2
    assert not old.exists() and not partial.exists() and fresh.exists()


def test_reverify_queues_a_new_job_and_keeps_the_old_one(owned_submission, maintainer):
    from submissions.models import VerificationJob

    _verify(owned_submission)
    before = VerificationJob.objects.filter(submission=owned_submission).count()
    sub = services.submission_reverify(submission=owned_submission, actor=maintainer,
                                       reason="grader 1.1")
    assert sub.status == SubmissionStatus.QUEUED and not sub.is_verified
    assert VerificationJob.objects.filter(submission=sub).count() == before + 1
    assert sub.events.last().note == "grader 1.1"
