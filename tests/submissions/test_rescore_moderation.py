"""R11 without Docker: which published submissions a grader update makes stale, and the
maintainers' Re-score action (the worker path is tests/evaluation/test_rescore.py)."""

import pytest
from django.utils import timezone

pytestmark = pytest.mark.django_db


def _publish(sub):
    from submissions.models import Submission, SubmissionStatus

    Submission.objects.filter(pk=sub.pk).update(status=SubmissionStatus.PUBLISHED,
                                                published_at=timezone.now())
    sub.refresh_from_db()
    return sub


def test_r11_category_rescore_picks_published_scores_of_older_grader_versions(owned_submission):
    """R11: `rescore --category` selects a published upload with a trial of the category whose
    score is unversioned or from an older version, and not once every score is current; an
    unpublished submission is never re-scored."""
    from evaluation import graders
    from evaluation.models import Category
    from submissions.models import Trial
    from submissions.services import SubmissionError, rescore_candidates

    ct = "ct-abnormality-classification"
    trial = owned_submission.trials.get()
    Category.objects.filter(pk=trial.benchmark_task.category_id).update(slug=ct)
    with pytest.raises(SubmissionError, match="not published"):
        rescore_candidates(submission_ids=[owned_submission.pk])
    assert rescore_candidates(category=ct) == []
    sub = _publish(owned_submission)
    assert rescore_candidates(category=ct) == [sub]  # never re-graded: unversioned
    Trial.objects.filter(pk=trial.pk).update(grader_version=f"{ct}@0")
    assert rescore_candidates(category=ct) == [sub]
    Trial.objects.filter(pk=trial.pk).update(grader_version=graders.version_label(ct))
    assert rescore_candidates(category=ct) == []
    assert rescore_candidates(category="clinical-trial-matching") == []
    assert rescore_candidates(submission_ids=[sub.pk]) == [sub]
    with pytest.raises(SubmissionError, match="unknown category"):
        rescore_candidates(category="no-such-category")


def test_r11_maintainer_rescore_action_queues_one_job_and_leaves_the_score(
        client, owned_submission, owner, maintainer):
    """R11: the Re-score button (maintainers only) queues one re-score job for a published
    upload (pressing it again reuses the live job); the submission stays published with its
    trials untouched until the worker's switch; an unpublished submission is refused."""
    from submissions.models import JobPurpose, Submission, VerificationJob

    url = f"/submissions/{owned_submission.pk}/rescore/"
    client.force_login(maintainer)
    client.post(url, {"reason": "grader update"})
    assert not VerificationJob.objects.filter(purpose=JobPurpose.RESCORE).exists()
    sub = _publish(owned_submission)
    client.force_login(owner)
    client.post(url, {"reason": "mine"})
    assert not VerificationJob.objects.filter(purpose=JobPurpose.RESCORE).exists()
    client.force_login(maintainer)
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert 'data-testid="rescore"' in page
    for _ in range(2):
        response = client.post(url, {"reason": "grader update"})
        assert response.status_code == 302
    jobs = list(VerificationJob.objects.filter(submission=sub))
    assert [(j.purpose, j.status, j.config["checks"]) for j in jobs] == [
        ("rescore", "pending", ["regrade", "replay", "traj_judge"])]
    assert Submission.objects.get(pk=sub.pk).status == "published"
    trial = sub.trials.get()
    assert (trial.outcome, trial.verified_reward, trial.grader_version) == ("passed", None, "")
    notes = [e.note for e in sub.events.all()]
    assert notes == [f"re-score requested (job {jobs[0].pk}): grader update"]
